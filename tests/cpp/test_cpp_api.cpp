// The C++ API (ovf/ovf.h) in process: which module an op is named after
// (scopes, parameters, views of parameters), the options the environment
// overrides, raise thrown at the next API call, detect_overflow. The example
// program's end-to-end behaviour is tested from Python (tests/python/test_cpp_api.py,
// tests/e2e/test_cpp_api.py). Only <torch/nn/module.h> here, not <torch/torch.h>.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>

#include <string>

#include "ovf/ovf.h"
#include "parameters.h"
#include "ring_writer.h"

namespace {

struct Leaf : torch::nn::Module {
  Leaf() { weight = register_parameter("weight", at::ones({2, 2})); }
  at::Tensor weight;
};

struct Block : torch::nn::Module {
  Block() { fc = register_module("fc", std::make_shared<Leaf>()); }
  std::shared_ptr<Leaf> fc;
};

struct Root : torch::nn::Module {
  Root() {
    block = register_module("block", std::make_shared<Block>());
    other = register_module("other", std::make_shared<Leaf>());
  }
  std::shared_ptr<Block> block;
  std::shared_ptr<Leaf> other;
};

// The module named by the newest OP_OUTPUT record of `op`, "(none)" without one.
std::string context_of(const char* op) {
  const uint64_t end = __atomic_load_n(&ovf_state.write_seq, __ATOMIC_ACQUIRE);
  for (uint64_t seq = end; seq-- > 0;) {
    const ovf_record* r = ovf::find_record(seq);
    if (r == nullptr) break;
    if (r->kind == OVF_KIND_OP_OUTPUT && ovf::interned(r->name_id) == op) {
      return r->context_id == OVF_NO_ID ? "(none)" : std::string(ovf::interned(r->context_id));
    }
  }
  return "no record of " + std::string(op);
}

class CppApi : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"OVF_ENABLE", "OVF_ON_NAN", "OVF_STOP", "OVF_OBSERVE", "OVF_MODULE",
                             "OVF_AFTER_BATCH", "OVF_MAX_FRAMES"}) {
      unsetenv(name);
    }
  }
  Root root;
  at::Tensor x = at::ones({2, 2});
};

TEST_F(CppApi, OpsAreNamedByTheParametersTheyTake) {
  ovf::Watch watch(root);
  at::mul(x, root.block->fc->weight);
  EXPECT_EQ(context_of("aten::mul"), "block.fc");
  at::sub(x, root.block->fc->weight.t());  // a view: the same storage
  EXPECT_EQ(context_of("aten::sub"), "block.fc");
  at::div(x, root.other->weight);
  EXPECT_EQ(context_of("aten::div"), "other");
  at::add(x, x);
  EXPECT_EQ(context_of("aten::add"), "(none)");
}

TEST_F(CppApi, ScopesNameOpsAndParametersRefineThemInward) {
  ovf::Watch watch(root);
  {
    ovf::ModuleScope scope(root.block.get());
    at::add(x, x);
    EXPECT_EQ(context_of("aten::add"), "block");
    at::mul(x, root.block->fc->weight);  // inside block: refined
    EXPECT_EQ(context_of("aten::mul"), "block.fc");
    at::div(x, root.other->weight);  // not inside block: the scope wins
    EXPECT_EQ(context_of("aten::div"), "block");
    {
      ovf::ModuleScope loss("loss");
      at::sub(x, x);
      EXPECT_EQ(context_of("aten::sub"), "loss");
    }
  }
  at::add(x, 1);
  EXPECT_EQ(context_of("aten::add"), "(none)");
  Leaf stray;  // not part of the watched model: no scope
  ovf::ModuleScope scope(&stray);
  at::add(x, 2);
  EXPECT_EQ(context_of("aten::add"), "(none)");
}

TEST_F(CppApi, WatchingEndsWithTheWatch) {
  {
    ovf::Watch watch(root);
    EXPECT_EQ(ovf::parameter_module(root.block->fc->weight), ovf::intern("block.fc"));
    EXPECT_EQ(ovf_state.control.observe, uint32_t{OVF_OBSERVE_OPS});
    EXPECT_THROW(ovf::Watch second(root), std::logic_error);
  }
  EXPECT_EQ(ovf::parameter_module(root.block->fc->weight), OVF_NO_ID);
  EXPECT_EQ(ovf_state.control.observe, 0u);
  ovf::Watch again(root);  // one at a time, not one per process lifetime
}

TEST_F(CppApi, RaiseReportsAtTheOpAndThrowsAtTheNextApiCall) {
  ovf::Watch watch(root);
  watch.next_batch();
  EXPECT_EQ(watch.batch(), 1u);
  testing::internal::CaptureStdout();
  {
    ovf::ModuleScope scope(root.block.get());
    at::log(-x);  // an op never throws: the report only
  }
  const std::string report = testing::internal::GetCapturedStdout();
  EXPECT_NE(report.find("\nDetected inf/nan during batch_number=1\n"), std::string::npos) << report;
  EXPECT_NE(report.find("     nan      nan output = aten::log in block (produced here)\n"),
            std::string::npos)
      << report;
  EXPECT_NE(
      report.find("ovf: the first non-finite value was produced by aten::log in block (batch 1)\n"),
      std::string::npos)
      << report;
  try {
    watch.next_batch();
    FAIL() << "no NonFiniteError";
  } catch (const ovf::NonFiniteError& e) {
    EXPECT_EQ(e.batch(), 1u);
    EXPECT_EQ(std::string(e.what()).rfind("DebugUnderflowOverflow: inf/nan detected, aborting", 0),
              0u);
  }
  EXPECT_EQ(watch.batch(), 1u);  // the failed batch is not counted
  EXPECT_NO_THROW(watch.next_batch());
  EXPECT_EQ(watch.batch(), 2u);
}

TEST_F(CppApi, DetectOverflowPrintsAndThrowsAPendingRaise) {
  testing::internal::CaptureStdout();
  const at::Tensor bad = at::log(-x);
  EXPECT_TRUE(ovf::detect_overflow(bad, "bad"));  // without a Watch: the reference's function
  EXPECT_FALSE(ovf::detect_overflow(x, "good"));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "bad has nans\n");
  ovf::Watch watch(root);
  testing::internal::CaptureStdout();
  at::log(-x);
  testing::internal::GetCapturedStdout();
  EXPECT_THROW(ovf::detect_overflow(x, "good"), ovf::NonFiniteError);
  EXPECT_NO_THROW(watch.next_batch());  // thrown once
}

// The program's exit status, which ovf's exit judge sets: each test ends its own
// process (a death test; the binary re-executed, not forked with torch's threads),
// so that the other tests' process does not inherit it.
class CppApiExit : public CppApi {
 protected:
  void SetUp() override {
    CppApi::SetUp();
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(CppApiExit, WarnReportsOnceTrainsOnAndTheProgramExitsWith1) {
  const auto train_on_after_a_nan = [this] {
    ovf::Options options;
    options.on_nan = ovf::OnNan::kWarn;
    ovf::Watch watch(root, options);
    testing::internal::CaptureStdout();
    at::log(-x);
    at::log(-x * 2);
    const std::string out = testing::internal::GetCapturedStdout();
    const size_t first = out.find("Detected inf/nan");
    if (first == std::string::npos || first != out.rfind("Detected inf/nan")) std::exit(3);
    watch.next_batch();  // no throw: warn goes on
    std::exit(0);        // the program's own status, replaced at the exit
  };
  EXPECT_EXIT(train_on_after_a_nan(), testing::ExitedWithCode(1),
              "ovf: non-finite values were found \\(the report above\\) and on_nan warn let the "
              "run go on; exit status 1");
}

// The exit judge's two other cases: a raise decided after the program's last
// check, and a step's event no later op answered.
TEST_F(CppApiExit, ARaiseNoCallWasLeftToThrowEndsTheProgramWith1) {
  const auto end_after_a_nan = [this] {
    ovf::Watch watch(root);
    testing::internal::CaptureStdout();
    at::log(-x);  // decided here; no next_batch() follows
    std::exit(0);
  };
  EXPECT_EXIT(end_after_a_nan(), testing::ExitedWithCode(1),
              "ovf: non-finite values were found after the program's last check \\(the report "
              "above\\); exit status 1, as the throw would have given");
}

TEST_F(CppApiExit, ALastStepsNanIsAnsweredAtTheExit) {
  const auto overflow_the_last_step = [this] {
    ovf::Options options;
    options.ops = false;  // the step check alone sees it
    ovf::Watch watch(root, options);
    torch::optim::SGD sgd(root.parameters(), torch::optim::SGDOptions(1e38));
    for (at::Tensor& p : root.parameters()) p.mutable_grad() = at::full_like(p, 1e3);
    sgd.step();
    watch.after_step(sgd);
    std::exit(0);
  };
  EXPECT_EXIT(overflow_the_last_step(), testing::ExitedWithCode(1),
              "after the program's last check \\(the report above\\); exit status 1");
}

TEST_F(CppApi, TheEnvironmentOverridesOptionsOnlyWithOvfEnable) {
  setenv("OVF_ON_NAN", "warn", 1);
  {
    ovf::Watch watch(root);
    EXPECT_EQ(watch.options().on_nan, ovf::OnNan::kRaise);
  }
  setenv("OVF_ENABLE", "1", 1);
  setenv("OVF_STOP", "nan,inf", 1);  // what plain `ovf break-on-nan` sets
  setenv("OVF_MODULE", "block.*", 1);
  setenv("OVF_AFTER_BATCH", "3", 1);
  {
    ovf::Watch watch(root);
    EXPECT_EQ(watch.options().on_nan, ovf::OnNan::kWarn);
    EXPECT_EQ(watch.options().module, "block.*");
    EXPECT_EQ(watch.options().after_batch, 3);
    EXPECT_TRUE(watch.options().ops);
    // module-level stops become "where the value is produced" for ops
    EXPECT_EQ(ovf_state.control.stop_mask,
              uint32_t{OVF_STOP_NAN | OVF_STOP_INF | OVF_STOP_PRODUCER_ONLY});
    EXPECT_EQ(std::string(ovf_state.control.module_glob), "block.*");
    EXPECT_EQ(ovf_state.control.after_batch, 3);
  }
  setenv("OVF_OBSERVE", "ops,backward", 1);  // `break-on-nan --backward --carriers`
  {
    ovf::Watch watch(root);
    EXPECT_TRUE(watch.options().backward);
    EXPECT_TRUE(watch.options().carriers);
    EXPECT_EQ(ovf_state.control.stop_mask, uint32_t{OVF_STOP_NAN | OVF_STOP_INF});
    EXPECT_EQ(ovf_state.control.observe, uint32_t{OVF_OBSERVE_OPS | OVF_OBSERVE_BACKWARD});
  }
  setenv("OVF_ON_NAN", "sometimes", 1);
  EXPECT_THROW(ovf::Watch watch(root), ovf::OptionError);
  unsetenv("OVF_ON_NAN");
  ovf::Watch after(root);  // a refused Watch leaves none active
}

}  // namespace
