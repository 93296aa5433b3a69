// Reading checkpoints: serial, read-only, validated against what the caller's model expects.
#include <algorithm>
#include <cmath>
#include <map>

#include "chimera/core/error.hpp"
#include "chimera/h5/check.hpp"
#include "chimera/h5/file.hpp"
#include "chimera/h5/stored_data.hpp"
#include "chimera/io/checkpoint.hpp"
#include "chimera/io/init_weights.hpp"

namespace chimera::io {

namespace {

constexpr const char* kWhat = "checkpoint (HDF5 written by `chimera train --save-dir`)";

template <typename Info>
herr_t collect_dataset(hid_t, const char* name, const Info* info, void* names) {
  if (info->type == H5O_TYPE_DATASET)
    static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

// A tensor's shape, refused when its element count does not fit int64: only a damaged file
// claims that many (TensorSpec::numel would overflow).
std::vector<std::int64_t> tensor_shape(hid_t dataset, const std::string& path,
                                       const std::string& name) {
  const auto shape = h5::dataset_shape(dataset);
  std::int64_t elements = 1;
  for (const std::int64_t d : shape) {
    CHIMERA_REQUIRE(d >= 0 && !__builtin_mul_overflow(elements, d, &elements),
                    "{}: tensor '{}' claims more elements than any file holds; the file is "
                    "damaged",
                    path, name);
  }
  return shape;
}

// Weights and optimizer moments are finite in any file a run could continue from (a diverged
// state is never saved): a NaN or infinity, or a float64 beyond float32's range, would only
// surface later as a "diverged" run, blaming training for the file.
void require_finite(std::span<const float> values, const std::string& path, const std::string& name,
                    std::int64_t first_index) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
  CHIMERA_REQUIRE(bad == values.end(),
                  "{}: tensor '{}' holds {} at element {} (after conversion to float32); the "
                  "weights are damaged or from a diverged run",
                  path, name, *bad, first_index + (bad - values.begin()));
}

std::string expected_shape_note(const std::string& name) {
  return is_optimizer_state(name) ? " (optimizer state: resume with the same model)" : "";
}

}  // namespace

struct CheckpointReader::Impl {
  std::string path;
  h5::Handle file;
  std::int64_t tensor_bytes_read = 0;  // stored bytes of the tensor values read

  h5::Handle open_tensor(const std::string& name) const {
    CHIMERA_REQUIRE(h5::has_link(file.get(), name), "{}: has no tensor '{}'", path, name);
    h5::Handle dataset = h5::dataset_handle(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT));
    CHIMERA_REQUIRE(dataset.valid(), "{}: '{}' is not a tensor that can be opened (HDF5: {})", path,
                    name, h5::library_error_message());
    h5::Handle type = h5::datatype_handle(H5Dget_type(dataset.get()));
    const std::string dtype = type.valid() ? h5::describe_type(type.get()) : "unreadable";
    CHIMERA_REQUIRE(is_readable_float(dtype),
                    "{}: tensor '{}' has dtype {}, expected float32 (or float16, bfloat16, "
                    "float64, converted)",
                    path, name, dtype);
    if (const auto problem = h5::stored_data_problem(dataset.get()))
      throw InputError(fmt::format("{}: tensor '{}' {}", path, name, *problem));
    return dataset;
  }
};

CheckpointReader::CheckpointReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->file = h5::open_file_read(path, kWhat);
}
CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const std::string& CheckpointReader::path() const {
  return impl_->path;
}

std::int64_t CheckpointReader::tensor_bytes_read() const {
  return impl_->tensor_bytes_read;
}

bool CheckpointReader::is_chimera_checkpoint() const {
  const hid_t root = impl_->file.get();
  if (!h5::has_attribute(root, "format")) return false;
  try {
    return h5::read_string_attribute(root, "format", impl_->path) == kCheckpointFormat;
  } catch (const InputError&) {
    return false;
  }
}

CheckpointMeta CheckpointReader::meta() const {
  const hid_t root = impl_->file.get();
  const std::string& path = impl_->path;
  CHIMERA_REQUIRE(is_chimera_checkpoint(),
                  "{}: not a Chimera checkpoint (root attribute "
                  "format = '{}' is missing)",
                  path, kCheckpointFormat);
  const std::int64_t version = h5::read_int_attribute(root, "format_version", path);
  CHIMERA_REQUIRE(version >= 1 && version <= kCheckpointFormatVersion,
                  "{}: checkpoint format version {} is not supported (this build reads 1..{})",
                  path, version, kCheckpointFormatVersion);
  CheckpointMeta meta;
  meta.step = h5::read_int_attribute(root, "step", path);
  meta.seed = h5::read_int_attribute(root, "seed", path);
  meta.data_cursor = h5::read_int_attribute(root, "data_cursor", path);
  meta.config = h5::read_string_attribute(root, "config", path);
  if (h5::has_attribute(root, "skipped_steps"))
    meta.skipped_steps = h5::read_int_attribute(root, "skipped_steps", path);
  CHIMERA_REQUIRE(meta.step >= 0 && meta.data_cursor >= 0,
                  "{}: step = {} and data_cursor = {} must not be negative", path, meta.step,
                  meta.data_cursor);
  return meta;
}

std::vector<CheckpointReader::Entry> CheckpointReader::entries() const {
  std::vector<std::string> names;
#if H5_VERSION_GE(1, 12, 0)
  const herr_t status = H5Ovisit3(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC,
                                  collect_dataset<H5O_info2_t>, &names, H5O_INFO_BASIC);
#else
  const herr_t status = H5Ovisit2(impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC,
                                  collect_dataset<H5O_info_t>, &names, H5O_INFO_BASIC);
#endif
  CHIMERA_REQUIRE(status >= 0, "{}: cannot list the tensors, the file is damaged (HDF5: {})",
                  impl_->path, h5::library_error_message());
  std::sort(names.begin(), names.end());
  std::vector<Entry> entries;
  for (const std::string& name : names) {
    h5::Handle dataset = h5::dataset_handle(H5Dopen2(impl_->file.get(), name.c_str(), H5P_DEFAULT));
    CHIMERA_REQUIRE(dataset.valid(), "{}: tensor '{}' cannot be opened (HDF5: {})", impl_->path,
                    name, h5::library_error_message());
    h5::Handle type = h5::datatype_handle(H5Dget_type(dataset.get()));
    auto problem = h5::stored_data_problem(dataset.get());
    entries.push_back({{name, tensor_shape(dataset.get(), impl_->path, name)},
                       type.valid() ? h5::describe_type(type.get()) : "unreadable",
                       problem ? fmt::format("{}: tensor '{}' {}", impl_->path, name, *problem)
                               : std::optional<std::string>{}});
  }
  return entries;
}

std::optional<std::vector<std::int64_t>> CheckpointReader::shape(const std::string& name) const {
  if (!h5::has_link(impl_->file.get(), name)) return std::nullopt;
  h5::Handle dataset = h5::dataset_handle(H5Dopen2(impl_->file.get(), name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) return std::nullopt;
  return tensor_shape(dataset.get(), impl_->path, name);
}

void CheckpointReader::expect(std::span<const TensorSpec> expected) const {
  const std::string& path = impl_->path;
  std::map<std::string, const Entry*> present;
  const std::vector<Entry> all = entries();
  for (const Entry& e : all) present[e.spec.name] = &e;
  bool expects_optimizer = false;
  std::map<std::string, bool> wanted;
  for (const TensorSpec& spec : expected) {
    wanted[spec.name] = true;
    expects_optimizer = expects_optimizer || is_optimizer_state(spec.name);
    const auto it = present.find(spec.name);
    CHIMERA_REQUIRE(it != present.end(),
                    "{}: has no tensor '{}' (the model expects shape {}){}; was it written for "
                    "another model?",
                    path, spec.name, h5::format_shape(spec.shape), expected_shape_note(spec.name));
    CHIMERA_REQUIRE(is_readable_float(it->second->dtype),
                    "{}: tensor '{}' has dtype {}, expected float32", path, spec.name,
                    it->second->dtype);
    if (it->second->problem) throw InputError(*it->second->problem);
    CHIMERA_REQUIRE(it->second->spec.shape == spec.shape,
                    "{}: tensor '{}' has shape {} but the model expects {}; the checkpoint is of "
                    "a different model shape",
                    path, spec.name, h5::format_shape(it->second->spec.shape),
                    h5::format_shape(spec.shape));
  }
  for (const Entry& e : all) {
    if (is_optimizer_state(e.spec.name) && !expects_optimizer) continue;
    CHIMERA_REQUIRE(wanted.contains(e.spec.name),
                    "{}: has tensor '{}' of shape {} that the model does not have; the checkpoint "
                    "is of a different model shape",
                    path, e.spec.name, h5::format_shape(e.spec.shape));
  }
}

void CheckpointReader::read(const std::string& name, std::span<float> out) const {
  h5::Handle dataset = impl_->open_tensor(name);
  const auto shape = tensor_shape(dataset.get(), impl_->path, name);
  const TensorSpec spec{name, shape};
  CHIMERA_CHECK(static_cast<std::int64_t>(out.size()) == spec.numel(),
                "reading tensor '{}' of shape {} into {} floats", name, h5::format_shape(shape),
                out.size());
  CHIMERA_REQUIRE(
      H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
      "{}: reading tensor '{}' failed: the file is damaged or truncated (HDF5: {})", impl_->path,
      name, h5::library_error_message());
  impl_->tensor_bytes_read += static_cast<std::int64_t>(H5Dget_storage_size(dataset.get()));
  require_finite(out, impl_->path, name, 0);
}

void CheckpointReader::read_rows(const std::string& name, std::int64_t row_begin, std::int64_t rows,
                                 std::span<float> out) const {
  h5::Handle dataset = impl_->open_tensor(name);
  const auto shape = tensor_shape(dataset.get(), impl_->path, name);
  CHIMERA_REQUIRE(!shape.empty(), "{}: tensor '{}' is a scalar and has no rows", impl_->path, name);
  CHIMERA_CHECK(row_begin >= 0 && rows >= 0 && row_begin + rows <= shape[0],
                "rows [{}, {}) of tensor '{}' with {} rows", row_begin, row_begin + rows, name,
                shape[0]);
  const std::int64_t row = TensorSpec{name, shape}.numel() / std::max<std::int64_t>(shape[0], 1);
  CHIMERA_CHECK(static_cast<std::int64_t>(out.size()) == rows * row,
                "reading {} rows of {} floats of '{}' into {} floats", rows, row, name, out.size());
  if (rows == 0) return;
  h5::Handle file_space = h5::dataspace_handle(H5_CHECK(H5Dget_space(dataset.get())));
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  start[0] = static_cast<hsize_t>(row_begin);
  count[0] = static_cast<hsize_t>(rows);
  H5_CHECK(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                               count.data(), nullptr));
  const hsize_t elements = out.size();
  h5::Handle memory_space = h5::dataspace_handle(H5_CHECK(H5Screate_simple(1, &elements, nullptr)));
  CHIMERA_REQUIRE(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(),
                          H5P_DEFAULT, out.data()) >= 0,
                  "{}: reading rows of tensor '{}' failed: the file is damaged or truncated "
                  "(HDF5: {})",
                  impl_->path, name, h5::library_error_message());
  impl_->tensor_bytes_read +=
      static_cast<std::int64_t>(H5Dget_storage_size(dataset.get())) / shape[0] * rows;
  require_finite(out, impl_->path, name, row_begin * row);
}

}  // namespace chimera::io
