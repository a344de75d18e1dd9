// A small LibTorch training loop that goes non-finite, watched by ovf.
//
//   ./train            torch::log of a negative value in batch 2: first NaN made by
//                      aten::log in module "stretch" (Stretch), inside StretchImpl::forward
//   ./train overflow   an input of 3e38 in batch 2: the encoder's matmul overflows to inf,
//                      aten::addmm in module "encoder" (named by the parameters it takes)
//
// Without a debugger ovf prints its report at the op and the next watch.next_batch()
// throws ovf::NonFiniteError (on_nan raise; OVF_ENABLE=1 OVF_ON_NAN=warn|abort|wait
// choose another mode). Under gdb:
//
//   gdb --args ./train
//   (gdb) ovf break-on-nan
//   (gdb) run                                   # stops right after aten::log
//   (gdb) bt                                    # ... StretchImpl::forward ... main
//   (gdb) frame function StretchImpl::forward
//   (gdb) info locals                           # scaled, the tensor that went negative
#include <ovf/ovf.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <iostream>

// log(x * gain): fine while the encoder's output is positive.
struct StretchImpl : torch::nn::Module {
  explicit StretchImpl(int64_t features) {
    gain = register_parameter("gain", torch::ones({features}));
  }

  torch::Tensor forward(torch::Tensor x) {
    // Ops that take none of this module's parameters (torch::log here) are
    // named after the module only inside a scope; aten::mul takes `gain` and
    // would be named "stretch" without it.
    ovf::ModuleScope scope(this);
    torch::Tensor scaled = x * gain;
    torch::Tensor logged = torch::log(scaled);
    return logged;
  }

  torch::Tensor gain;
};
TORCH_MODULE(Stretch);

struct NetImpl : torch::nn::Module {
  NetImpl()
      : encoder(register_module("encoder", torch::nn::Linear(4, 8))),
        stretch(register_module("stretch", Stretch(8))),
        head(register_module("head", torch::nn::Linear(8, 1))) {
    torch::NoGradGuard no_grad;
    encoder->weight.fill_(0.5);  // positive outputs for inputs in [0, 1)
    encoder->bias.fill_(1.0);
  }

  torch::Tensor forward(torch::Tensor x) { return head(stretch(encoder(x))); }

  torch::nn::Linear encoder;
  Stretch stretch;
  torch::nn::Linear head;
};
TORCH_MODULE(Net);

int main(int argc, char** argv) {
  const bool overflow = argc > 1 && std::strcmp(argv[1], "overflow") == 0;
  if (argc > 2 || (argc == 2 && !overflow && std::strcmp(argv[1], "log") != 0)) {
    std::fprintf(stderr, "usage: %s [log|overflow]\n", argv[0]);
    return 2;
  }
  torch::manual_seed(0);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  try {
    ovf::Watch watch(*model);  // options: ovf::Options{}; OVF_* variables under a debugger
    for (int batch = 0; batch < 5; ++batch) {
      torch::Tensor x = torch::rand({16, 4});
      torch::Tensor target = x.sum(1, /*keepdim=*/true);
      if (batch == 2) {
        if (overflow) {
          x[3].fill_(3e38);  // finite in float32; 0.5 * 4 * 3e38 is not
        } else {
          x[3][0] = -10.0;  // a refund in the data: the encoder's output goes negative
        }
      }
      optimizer.zero_grad();
      torch::Tensor loss = torch::mse_loss(model->forward(x), target);
      loss.backward();
      optimizer.step();
      std::cout << "batch " << batch << " loss " << loss.item<float>() << std::endl;
      watch.next_batch();
    }
  } catch (const ovf::NonFiniteError& e) {
    std::cerr << "ovf::NonFiniteError (batch " << e.batch() << "): " << e.what() << std::endl;
    return 1;
  } catch (const ovf::OptionError& e) {  // a bad OVF_* variable
    std::cerr << e.what() << std::endl;
    return 2;
  }
  return 0;
}
