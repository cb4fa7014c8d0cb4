// The archives of serialized call arguments and replies, in cereal's binary format: the sender
// appends to a byte vector (no std::ostream: constructing one per call cost ~90 ns, more than the
// call); the receiver reads the received buffer in place, with every length prefix bounded by
// the bytes left. A peer that claims 2^57 elements gets a refusal, not an allocation of that size
// (found by tests/fuzz/arguments_fuzz; docs/fuzzing.md).
#pragma once

#include <cereal/archives/binary.hpp>
#include <cereal/cereal.hpp>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace seriema::invoke::detail {

// Writes what cereal::BinaryOutputArchive writes (arithmetic values and binary data as their
// bytes, size tags as cereal::size_type), appended to `out` (a warm scratch vector: no
// allocation once its capacity suffices).
class argument_output_archive
    : public cereal::OutputArchive<argument_output_archive, cereal::AllowEmptyClassElision> {
 public:
  explicit argument_output_archive(std::vector<std::byte>& out) : OutputArchive(this), out_(out) {}

  void save_bytes(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), bytes, bytes + size);
  }

 private:
  std::vector<std::byte>& out_;
};

template <class T>
void prologue(argument_output_archive&, const T&) {}
template <class T>
void epilogue(argument_output_archive&, const T&) {}

template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_SAVE_FUNCTION_NAME(argument_output_archive& ar,
                                                                     const T& value) {
  ar.save_bytes(std::addressof(value), sizeof value);
}
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(argument_output_archive& ar,
                               const cereal::NameValuePair<T>& pair) {
  ar(pair.value);
}
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(argument_output_archive& ar, const cereal::SizeTag<T>& tag) {
  const auto count = static_cast<cereal::size_type>(tag.size);  // as BinaryOutputArchive
  ar.save_bytes(&count, sizeof count);
}
template <class T>
void CEREAL_SAVE_FUNCTION_NAME(argument_output_archive& ar, const cereal::BinaryData<T>& data) {
  ar.save_bytes(data.data, static_cast<std::size_t>(data.size));
}

// Reads cereal's binary format (what cereal::BinaryOutputArchive writes) from `bytes`. A size
// tag (the element count of a string or container) larger than the bytes left is refused
// (cereal::Exception) before the container is sized: each element takes at least one byte. So
// containers of empty types, which serialize to nothing, are refused too.
class argument_input_archive
    : public cereal::InputArchive<argument_input_archive, cereal::AllowEmptyClassElision> {
 public:
  explicit argument_input_archive(std::span<const std::byte> bytes)
      : InputArchive(this), bytes_(bytes) {}

  // Copies the next `size` bytes to `out`; cereal::Exception when fewer are left.
  void load_bytes(void* out, std::size_t size) {
    if (size > remaining()) throw cereal::Exception("arguments end before their last value");
    if (size != 0) std::memcpy(out, bytes_.data() + read_, size);
    read_ += size;
  }
  // Refuses an element count no input of this length can hold.
  void check_count(std::size_t count) const {
    if (count > remaining()) {
      throw cereal::Exception("a length prefix claims more elements than bytes are left");
    }
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return bytes_.size() - read_; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t read_ = 0;
};

template <class T>
void prologue(argument_input_archive&, const T&) {}
template <class T>
void epilogue(argument_input_archive&, const T&) {}

template <class T>
std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(argument_input_archive& ar,
                                                                     T& value) {
  ar.load_bytes(std::addressof(value), sizeof value);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(argument_input_archive& ar, cereal::NameValuePair<T>& pair) {
  ar(pair.value);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(argument_input_archive& ar, cereal::SizeTag<T>& tag) {
  cereal::size_type count = 0;  // as cereal::BinaryOutputArchive writes it
  ar.load_bytes(&count, sizeof count);
  ar.check_count(static_cast<std::size_t>(count));
  tag.size = static_cast<std::remove_reference_t<T>>(count);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(argument_input_archive& ar, cereal::BinaryData<T>& data) {
  ar.load_bytes(data.data, static_cast<std::size_t>(data.size));
}

}  // namespace seriema::invoke::detail

CEREAL_REGISTER_ARCHIVE(seriema::invoke::detail::argument_output_archive)
CEREAL_REGISTER_ARCHIVE(seriema::invoke::detail::argument_input_archive)
CEREAL_SETUP_ARCHIVE_TRAITS(seriema::invoke::detail::argument_input_archive,
                            seriema::invoke::detail::argument_output_archive)
