// The archive a receiver decodes serialized call arguments with: cereal's binary format, read
// from the received buffer in place, with every length prefix bounded by the bytes left. A peer
// that claims 2^57 elements gets a refusal, not an allocation of that size (found by
// tests/fuzz/arguments_fuzz; docs/fuzzing.md).
#pragma once

#include <cereal/archives/binary.hpp>
#include <cereal/cereal.hpp>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>

namespace seriema::invoke::detail {

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

CEREAL_REGISTER_ARCHIVE(seriema::invoke::detail::argument_input_archive)
// Half of CEREAL_SETUP_ARCHIVE_TRAITS: BinaryOutputArchive's input side stays cereal's own.
namespace cereal::traits::detail {
template <>
struct get_output_from_input<seriema::invoke::detail::argument_input_archive> {
  using type = cereal::BinaryOutputArchive;
};
}  // namespace cereal::traits::detail
