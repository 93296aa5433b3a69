// Any file handed to `chimera import-hf` as model.safetensors: a clear InputError or a valid
// read, never a crash, an internal error or a read outside the file.
#include "chimera/core/error.hpp"
#include "chimera/io/safetensors.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = chimera::fuzz::write_input(data, size, "-model.safetensors");
  try {
    const chimera::io::SafetensorsReader reader(path);
    for (const auto& entry : reader.tensors()) {
      if (entry.numel() > (1 << 20)) continue;
      try {
        const auto values = reader.read_f32(entry);
        if (static_cast<std::int64_t>(values.size()) != entry.numel()) std::abort();
      } catch (const chimera::InputError&) {
      }
    }
  } catch (const chimera::InputError&) {
  }
  return 0;
}
