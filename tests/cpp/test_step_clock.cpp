// The user's training step (step_clock.h): which forwards begin one, under each
// rule, for the loops people write.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "step_clock.h"

namespace {

using ovf::StepClock;
using ovf::StepEnd;
using Begins = StepClock::Begins;

constexpr uint32_t kModel = 1, kGenerator = 2, kDiscriminator = 3;
constexpr uint32_t kLine = 7, kOtherLine = 8;  // the program's lines that call the models

TEST(StepClock, TheFirstForwardBeginsNothing) {
  StepClock clock;
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
}

TEST(StepClock, WithoutBackwardARepeatedForwardBeginsAStep) {
  StepClock clock;
  EXPECT_EQ(clock.begins_step(kModel, false, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, false, kLine), Begins::kYes);     // inference under no_grad
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kGuessed);  // gradients on: a guess
}

TEST(StepClock, ASiamesePairIsOneStepOnceBackwardIsSeen) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(clock.begins_step(kModel, true, kLine), step == 0 ? Begins::kNo : Begins::kYes);
    EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);  // the pair's second image
    clock.end_step();                                                // the optimizer's round
  }
}

TEST(StepClock, AGansSecondModelAndItsOptimizerEndNothingUntilTheRoundEnds) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  EXPECT_EQ(clock.begins_step(kDiscriminator, true, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kGenerator, true, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kDiscriminator, true, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kGenerator, true, kLine), Begins::kNo);  // the generator's update
  clock.end_step();
  EXPECT_EQ(clock.begins_step(kDiscriminator, true, kLine), Begins::kYes);
}

// A loss scaler of the program's own skips optimizer.step() on an inf loss: the
// line that began the step calling the model again is the loop's next step (and
// so is a micro-batch of gradient accumulation). A GAN's discriminator called
// from other lines between its backward and its optimizer's step is not.
TEST(StepClock, ABackwardWhoseGradientsWereNeverAppliedEndsItsStep) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
  clock.set_gradients_pending(true);  // backward(), then no optimizer step
  EXPECT_EQ(clock.begins_step(kModel, false, kLine), Begins::kNo);      // evaluation: the same step
  EXPECT_EQ(clock.begins_step(kModel, true, kOtherLine), Begins::kNo);  // another line
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kYes);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);  // pending no more
  clock.set_gradients_pending(true);
  EXPECT_EQ(clock.begins_step(kModel, true, OVF_NO_ID), Begins::kNo);  // no line known
}

TEST(StepClock, ADcganIterationIsOneStep) {
  constexpr uint32_t kReal = 10, kNoise = 11, kFake = 12, kGeneratorUpdate = 13;
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(clock.begins_step(kDiscriminator, true, kReal), step ? Begins::kYes : Begins::kNo);
    clock.set_gradients_pending(true);  // err_real.backward()
    EXPECT_EQ(clock.begins_step(kGenerator, true, kNoise), Begins::kNo);
    EXPECT_EQ(clock.begins_step(kDiscriminator, true, kFake), Begins::kNo);
    clock.set_gradients_pending(true);   // err_fake.backward()
    clock.set_gradients_pending(false);  // opt_d.step()
    EXPECT_EQ(clock.begins_step(kGenerator, true, kNoise), Begins::kNo);
    EXPECT_EQ(clock.begins_step(kDiscriminator, true, kGeneratorUpdate), Begins::kNo);
    clock.set_gradients_pending(true);   // err_g.backward()
    clock.set_gradients_pending(false);  // opt_g.step()
    clock.end_step();                    // the round of both optimizers
  }
}

TEST(StepClock, EvaluationUnderNoGradAfterAStepBelongsToThatStep) {
  StepClock clock;
  clock.set_step_end(StepEnd::kBackward);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
  clock.end_step();
  EXPECT_EQ(clock.begins_step(kModel, false, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, false, kLine), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kYes);
}

TEST(StepClock, BeginNowStartsAFreshStep) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
  clock.end_step();
  clock.begin_now();  // the step began without a forward: the next forward is in it
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
}

TEST(StepClock, ResetForgetsTheRule) {
  StepClock clock;
  clock.set_step_end(StepEnd::kBackward);
  clock.end_step();
  clock.reset();
  EXPECT_EQ(clock.step_end(), StepEnd::kRepeatedForward);
  EXPECT_EQ(clock.begins_step(kModel, true, kLine), Begins::kNo);
}

}  // namespace
