// Any file handed to the dataset reader: a clear InputError or a valid read, never a crash, a
// hang, or an internal error (chimera::Error escapes and aborts the fuzzer).
#include <algorithm>

#include "chimera/core/error.hpp"
#include "chimera/data/dataset.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = chimera::fuzz::write_input(data, size, "-dataset.h5");
  try {
    const auto ds = chimera::data::TokenDataset::open({path}, 50257);
    const int T = 4;
    const std::int64_t samples = ds.num_samples(T);
    std::vector<std::int32_t> sample(T + 1);
    for (std::int64_t i = 0; i < std::min<std::int64_t>(samples, 8); ++i)
      ds.read_sample(i, T, sample);
    if (samples > 8) ds.read_sample(samples - 1, T, sample);
  } catch (const chimera::InputError&) {
  }
  return 0;
}
