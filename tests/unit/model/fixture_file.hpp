#pragma once
// Reads the PyTorch fixture (tests/fixtures/gpt2_parity.h5) with the HDF5 C API.
#include <hdf5.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace chimera::model::testing {

class FixtureFile {
 public:
  explicit FixtureFile(const std::string& path)
      : id_(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {
    if (id_ < 0) throw std::runtime_error("cannot open fixture " + path);
  }
  ~FixtureFile() { H5Fclose(id_); }
  FixtureFile(const FixtureFile&) = delete;
  FixtureFile& operator=(const FixtureFile&) = delete;

  std::vector<float> floats(const std::string& name) const {
    return read<float>(name, H5T_NATIVE_FLOAT);
  }
  std::vector<double> doubles(const std::string& name) const {
    return read<double>(name, H5T_NATIVE_DOUBLE);
  }
  std::vector<std::int32_t> ints(const std::string& name) const {
    return read<std::int32_t>(name, H5T_NATIVE_INT32);
  }
  double attribute(const std::string& name) const {
    const hid_t attr = H5Aopen(id_, name.c_str(), H5P_DEFAULT);
    if (attr < 0) throw std::runtime_error("fixture has no attribute " + name);
    double value = 0;
    H5Aread(attr, H5T_NATIVE_DOUBLE, &value);
    H5Aclose(attr);
    return value;
  }

 private:
  template <typename T>
  std::vector<T> read(const std::string& name, hid_t type) const {
    const hid_t ds = H5Dopen2(id_, name.c_str(), H5P_DEFAULT);
    if (ds < 0) throw std::runtime_error("fixture has no dataset " + name);
    const hid_t space = H5Dget_space(ds);
    std::vector<T> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
    H5Sclose(space);
    H5Dclose(ds);
    return out;
  }

  hid_t id_;
};

}  // namespace chimera::model::testing
