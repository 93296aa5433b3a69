#pragma once
// RAII ownership of HDF5 identifiers. Every hid_t that Chimera opens lives in a Handle, so an
// exception (bad input, failed check) never leaks an open file or dataset: a leaked file id keeps
// the file open and, under MPI-IO, makes the next collective close hang.
#include <hdf5.h>

#include <utility>

namespace chimera::h5 {

using CloseFn = herr_t (*)(hid_t);

class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, CloseFn closer) : id_(id), close_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      close_ = other.close_;
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Closes now; returns the HDF5 status (negative on failure) so that a caller that must know
  // whether the data reached the file (a checkpoint) can check it.
  herr_t close() {
    herr_t status = 0;
    if (id_ >= 0 && close_ != nullptr) status = close_(id_);
    id_ = H5I_INVALID_HID;
    return status;
  }
  void reset() { close(); }

 private:
  hid_t id_ = H5I_INVALID_HID;
  CloseFn close_ = nullptr;
};

// One constructor per kind of identifier, each with its own close function.
inline Handle file_handle(hid_t id) {
  return Handle(id, H5Fclose);
}
inline Handle group_handle(hid_t id) {
  return Handle(id, H5Gclose);
}
inline Handle dataset_handle(hid_t id) {
  return Handle(id, H5Dclose);
}
inline Handle dataspace_handle(hid_t id) {
  return Handle(id, H5Sclose);
}
inline Handle datatype_handle(hid_t id) {
  return Handle(id, H5Tclose);
}
inline Handle attribute_handle(hid_t id) {
  return Handle(id, H5Aclose);
}
inline Handle plist_handle(hid_t id) {
  return Handle(id, H5Pclose);
}

}  // namespace chimera::h5
