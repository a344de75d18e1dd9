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

TEST(StepClock, TheFirstForwardBeginsNothing) {
  StepClock clock;
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);
}

TEST(StepClock, WithoutBackwardARepeatedForwardBeginsAStep) {
  StepClock clock;
  EXPECT_EQ(clock.begins_step(kModel, false), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, false), Begins::kYes);     // inference under no_grad
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kGuessed);  // gradients on: a guess
}

TEST(StepClock, ASiamesePairIsOneStepOnceBackwardIsSeen) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(clock.begins_step(kModel, true), step == 0 ? Begins::kNo : Begins::kYes);
    EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);  // the pair's second image
    clock.end_step();                                         // the optimizer's round
  }
}

TEST(StepClock, AGansSecondModelAndItsOptimizerEndNothingUntilTheRoundEnds) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  EXPECT_EQ(clock.begins_step(kDiscriminator, true), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kGenerator, true), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kDiscriminator, true), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kGenerator, true), Begins::kNo);  // the generator's update
  clock.end_step();
  EXPECT_EQ(clock.begins_step(kDiscriminator, true), Begins::kYes);
}

TEST(StepClock, EvaluationUnderNoGradAfterAStepBelongsToThatStep) {
  StepClock clock;
  clock.set_step_end(StepEnd::kBackward);
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);
  clock.end_step();
  EXPECT_EQ(clock.begins_step(kModel, false), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, false), Begins::kNo);
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kYes);
}

TEST(StepClock, BeginNowStartsAFreshStep) {
  StepClock clock;
  clock.set_step_end(StepEnd::kOptimizerRound);
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);
  clock.end_step();
  clock.begin_now();  // the step began without a forward: the next forward is in it
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);
}

TEST(StepClock, ResetForgetsTheRule) {
  StepClock clock;
  clock.set_step_end(StepEnd::kBackward);
  clock.end_step();
  clock.reset();
  EXPECT_EQ(clock.step_end(), StepEnd::kRepeatedForward);
  EXPECT_EQ(clock.begins_step(kModel, true), Begins::kNo);
}

}  // namespace
