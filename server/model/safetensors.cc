#include "server/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace adapterd::model {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr size_t kLengthPrefixBytes = 8;
// The schema nests at most three levels (root -> entry -> shape). Allowing a
// few more keeps error messages specific ("shape dim is not an integer") for
// slightly-off files, while a hostile `[[[[...` header cannot make the DOM or
// any later recursive walk (destructor, dump) deep.
constexpr size_t kMaxJsonDepth = 16;

// Builds a DOM like nlohmann's own parser, but rejects duplicate keys (which
// nlohmann silently collapses, and which would let two tensor entries shadow
// each other) and bounds the nesting depth. Never throws: failures are
// recorded in `error` and stop the parse by returning false.
class HeaderSax final : public nlohmann::json_sax<Json> {
 public:
  Json root;
  std::string error;

  bool null() override { return Put(Json(nullptr)) != nullptr; }
  bool boolean(bool val) override { return Put(Json(val)) != nullptr; }
  bool number_integer(number_integer_t val) override { return Put(Json(val)) != nullptr; }
  bool number_unsigned(number_unsigned_t val) override { return Put(Json(val)) != nullptr; }
  bool number_float(number_float_t val, const string_t& /*s*/) override { return Put(Json(val)) != nullptr; }
  bool string(string_t& val) override { return Put(Json(std::move(val))) != nullptr; }
  bool binary(binary_t& /*val*/) override {
    // Unreachable for JSON text (only the binary formats produce it).
    error = "unexpected binary value in the JSON header";
    return false;
  }
  bool start_object(std::size_t /*elements*/) override { return Open(Json::object()); }
  bool key(string_t& val) override {
    // The top of the stack is always an object when the parser emits a key.
    if (stack_.back()->contains(val)) {
      error = absl::StrCat("duplicate key '", val, "' in the JSON header");
      return false;
    }
    pending_key_ = std::move(val);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*elements*/) override { return Open(Json::array()); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::json::exception& ex) override {
    error = absl::StrCat("header is not valid JSON: ", ex.what());
    return false;
  }

 private:
  // Inserts `value` at the current position and returns where it now lives.
  Json* Put(Json value) {
    if (stack_.empty()) {
      root = std::move(value);
      return &root;
    }
    Json* parent = stack_.back();
    if (parent->is_array()) {
      // Pointers into the array stay valid: nothing else is appended to this
      // array while the new element is on the stack.
      parent->get_ref<Json::array_t&>().push_back(std::move(value));
      return &parent->get_ref<Json::array_t&>().back();
    }
    auto& object = parent->get_ref<Json::object_t&>();
    auto [it, inserted] = object.emplace(std::move(pending_key_), std::move(value));
    (void)inserted;  // key() already rejected duplicates.
    return &it->second;
  }

  bool Open(Json container) {
    if (stack_.size() >= kMaxJsonDepth) {
      error = absl::StrCat("JSON header nests deeper than ", kMaxJsonDepth, " levels");
      return false;
    }
    Json* where = Put(std::move(container));
    stack_.push_back(where);
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  std::vector<Json*> stack_;
  std::string pending_key_;
};

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", message));
}

absl::Status TensorError(absl::string_view name, absl::string_view problem) {
  return Invalid(absl::StrCat("tensor '", name, "': ", problem));
}

std::string ShapeString(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

// Debian's Abseil is built with its own absl::string_view, so StrCat accepts no
// std::string_view.
std::string DTypeStr(DType dtype) { return std::string(DTypeName(dtype)); }

uint64_t ReadLittleEndian64(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(p[i]);
  return value;
}

// Product of the dimensions; false on overflow. A zero dimension makes the
// product zero however large the others are, so it is checked first rather
// than letting an early overflow reject a legal empty tensor.
bool CheckedNumel(const std::vector<int64_t>& shape, int64_t* numel) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *numel = 0;
    return true;
  }
  int64_t product = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(product, dim, &product)) return false;
  }
  *numel = product;
  return true;
}

// Byte size of `numel` elements of `dtype`; false on overflow.
bool CheckedByteSize(int64_t numel, DType dtype, uint64_t* bytes) {
  if (numel < 0) return false;
  return !__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(DTypeSize(dtype)), bytes);
}

const char* JsonTypeName(const Json& value) {
  if (value.is_number_unsigned()) return "unsigned integer";
  if (value.is_number_integer()) return "negative integer";
  if (value.is_number_float()) return "non-integer number";
  return value.type_name();
}

struct ParsedEntry {
  std::string name;
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Validates one tensor entry; `data` is the whole data section.
absl::StatusOr<ParsedEntry> ParseEntry(const std::string& name, const Json& entry, std::span<const std::byte> data) {
  if (!entry.is_object()) {
    return TensorError(name, absl::StrCat("entry is a JSON ", entry.type_name(), ", not an object"));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) {
      return TensorError(name, absl::StrCat("missing field '", field, "'"));
    }
  }
  for (const auto& [field, value] : entry.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets") {
      return TensorError(name, absl::StrCat("unexpected extra field '", field, "'"));
    }
  }

  ParsedEntry out;
  out.name = name;

  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    return TensorError(name, absl::StrCat("dtype is a JSON ", dtype.type_name(), ", not a string"));
  }
  absl::StatusOr<DType> parsed_dtype = ParseDType(dtype.get_ref<const std::string&>());
  if (!parsed_dtype.ok()) {
    return TensorError(name, absl::StrCat("unknown dtype '", dtype.get_ref<const std::string&>(), "'"));
  }
  out.view.dtype = *parsed_dtype;

  const Json& shape = entry["shape"];
  if (!shape.is_array()) {
    return TensorError(name, absl::StrCat("shape is a JSON ", shape.type_name(), ", not an array"));
  }
  out.view.shape.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    const Json& dim = shape[i];
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      return TensorError(name, absl::StrCat("shape dim ", i, " is negative (", dim.get<int64_t>(), ")"));
    }
    if (!dim.is_number_unsigned()) {
      return TensorError(name,
                         absl::StrCat("shape dim ", i, " is a ", JsonTypeName(dim), ", not a non-negative integer"));
    }
    uint64_t value = dim.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(name, absl::StrCat("shape dim ", i, " (", value, ") is too large"));
    }
    out.view.shape.push_back(static_cast<int64_t>(value));
  }
  int64_t numel = 0;
  uint64_t needed = 0;
  if (!CheckedNumel(out.view.shape, &numel) || !CheckedByteSize(numel, out.view.dtype, &needed)) {
    return TensorError(name, absl::StrCat("shape ", ShapeString(out.view.shape), " of ", DTypeStr(out.view.dtype),
                                          " overflows the element count or byte size"));
  }

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return TensorError(name, "data_offsets must be an array of exactly 2 integers");
  }
  for (size_t i = 0; i < 2; ++i) {
    if (!offsets[i].is_number_unsigned()) {
      return TensorError(
          name, absl::StrCat("data_offsets[", i, "] is a ", JsonTypeName(offsets[i]), ", not a non-negative integer"));
    }
  }
  out.begin = offsets[0].get<uint64_t>();
  out.end = offsets[1].get<uint64_t>();
  if (out.begin > out.end) {
    return TensorError(name, absl::StrCat("data_offsets [", out.begin, ", ", out.end, ") have begin > end"));
  }
  if (out.end > data.size()) {
    return TensorError(name, absl::StrCat("data_offsets [", out.begin, ", ", out.end,
                                          ") are out of range: the data section holds ", data.size(), " bytes"));
  }
  if (out.end - out.begin != needed) {
    return TensorError(name, absl::StrCat("data_offsets [", out.begin, ", ", out.end, ") hold ", out.end - out.begin,
                                          " bytes but shape ", ShapeString(out.view.shape), " of ",
                                          DTypeStr(out.view.dtype), " needs ", needed));
  }
  out.view.data = data.subspan(static_cast<size_t>(out.begin), static_cast<size_t>(out.end - out.begin));
  return out;
}

absl::StatusOr<std::map<std::string, std::string, std::less<>>> ParseMetadata(const Json& value) {
  if (!value.is_object()) {
    return Invalid(absl::StrCat("__metadata__ is a JSON ", value.type_name(), ", not an object"));
  }
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return Invalid(
          absl::StrCat("__metadata__ value for key '", key, "' is a JSON ", item.type_name(), ", not a string"));
    }
    out.emplace(key, item.get<std::string>());
  }
  return out;
}

// Every byte of the data section belongs to exactly one tensor (as in the
// reference implementation): stray bytes would hide data, and overlaps would
// alias two tensors' storage.
absl::Status CheckCoverage(std::vector<const ParsedEntry*> entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const ParsedEntry* a, const ParsedEntry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  uint64_t covered = 0;
  const ParsedEntry* previous = nullptr;
  for (const ParsedEntry* e : entries) {
    if (e->begin < covered) {
      return TensorError(e->name, absl::StrCat("data_offsets [", e->begin, ", ", e->end, ") overlap tensor '",
                                               previous->name, "' [", previous->begin, ", ", previous->end, ")"));
    }
    if (e->begin > covered) {
      return TensorError(
          e->name, absl::StrCat("gap before data_offsets [", e->begin, ", ", e->end, "): uncovered bytes [", covered,
                                ", ", e->begin, ") of the data section"));
    }
    covered = e->end;
    previous = e;
  }
  if (covered != data_size) {
    return Invalid(absl::StrCat("gap at the end: uncovered bytes [", covered, ", ", data_size,
                                ") of the data section belong to no tensor"));
  }
  return absl::OkStatus();
}

// The header's JSON object.
absl::StatusOr<Json> ParseHeaderJson(const char* header_begin, uint64_t header_len) {
  // nlohmann's lexer takes a NUL outside a string as end of input, so
  // "{}\0<junk>" would parse; JSON text never contains a raw NUL.
  if (const void* nul = std::memchr(header_begin, '\0', header_len); nul != nullptr) {
    return Invalid(absl::StrCat("header is not valid JSON: NUL byte at header offset ",
                                static_cast<const char*>(nul) - header_begin));
  }
  HeaderSax sax;
  try {
    bool ok = Json::sax_parse(header_begin, header_begin + header_len, &sax);
    if (!ok) {
      return Invalid(sax.error.empty() ? std::string("header is not valid JSON") : sax.error);
    }
  } catch (const Json::exception& e) {
    // sax_parse reports through parse_error; this is a belt for anything it
    // throws directly.
    return Invalid(absl::StrCat("header is not valid JSON: ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("safetensors: out of memory parsing the header");
  }
  if (!sax.root.is_object()) {
    return Invalid(absl::StrCat("header JSON is a ", sax.root.type_name(), ", not an object"));
  }
  return std::move(sax.root);
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;  // Not a DType value (a bad cast); callers treat 0 as invalid.
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return "F64";
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI16:
      return "I16";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "INVALID";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType dtype : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI16,
                      DType::kI8, DType::kU8, DType::kBool}) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown safetensors dtype '", absl::string_view(name.data(), name.size()), "'"));
}

int64_t TensorView::numel() const {
  // Views from Parse have validated shapes; saturating keeps a hand-built view
  // with an absurd shape from signed-overflow UB.
  int64_t product = 1;
  for (int64_t dim : shape) {
    if (dim == 0) return 0;
  }
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(product, dim, &product)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return product;
}

absl::StatusOr<std::optional<SafetensorsHeader>> ReadSafetensorsHeader(std::span<const std::byte> prefix,
                                                                       const SafetensorsLimits& limits) {
  if (prefix.size() < kLengthPrefixBytes) return std::nullopt;
  const uint64_t header_len = ReadLittleEndian64(prefix.data());
  if (header_len == 0) return Invalid("header length is 0");
  if (header_len > limits.max_header_bytes) {
    return Invalid(
        absl::StrCat("header length ", header_len, " exceeds the limit of ", limits.max_header_bytes, " bytes"));
  }
  if (prefix.size() - kLengthPrefixBytes < header_len) return std::nullopt;
  ASSIGN_OR_RETURN(const Json root,
                   ParseHeaderJson(reinterpret_cast<const char*>(prefix.data() + kLengthPrefixBytes), header_len));
  SafetensorsHeader out;
  uint64_t data_bytes = 0;
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey) {
      ASSIGN_OR_RETURN(out.metadata, ParseMetadata(value));
      continue;
    }
    const Json* offsets = value.is_object() && value.contains("data_offsets") ? &value["data_offsets"] : nullptr;
    if (offsets == nullptr || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned() || (*offsets)[0].get<uint64_t>() > (*offsets)[1].get<uint64_t>()) {
      return Invalid(absl::StrCat("tensor '", name, "': data_offsets must be [begin, end] with 0 <= begin <= end"));
    }
    data_bytes = std::max(data_bytes, (*offsets)[1].get<uint64_t>());
  }
  if (data_bytes > std::numeric_limits<uint64_t>::max() - kLengthPrefixBytes - header_len) {
    return Invalid("data_offsets past any possible file size");
  }
  out.total_bytes = kLengthPrefixBytes + header_len + data_bytes;
  return out;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path, const SafetensorsLimits& limits) {
  // I/O errors from MappedFile already name the path.
  ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::Open(path));
  std::span<const std::byte> bytes = mapped->bytes();
  absl::StatusOr<SafetensorsFile> file = Parse(bytes, std::move(mapped), limits);
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::FromString(std::string bytes, const SafetensorsLimits& limits) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  std::span<const std::byte> view(reinterpret_cast<const std::byte*>(owned->data()), owned->size());
  return Parse(view, std::move(owned), limits);
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::Parse(std::span<const std::byte> bytes,
                                                       std::shared_ptr<const void> holder,
                                                       const SafetensorsLimits& limits) {
  if (bytes.size() < kLengthPrefixBytes) {
    return Invalid(absl::StrCat("input is ", bytes.size(), " bytes, too short for the 8-byte header length"));
  }
  const uint64_t header_len = ReadLittleEndian64(bytes.data());
  const uint64_t available = bytes.size() - kLengthPrefixBytes;
  if (header_len == 0) return Invalid("header length is 0");
  if (header_len > limits.max_header_bytes) {
    return Invalid(
        absl::StrCat("header length ", header_len, " exceeds the limit of ", limits.max_header_bytes, " bytes"));
  }
  if (header_len > available) {
    return Invalid(absl::StrCat("header length ", header_len, " runs past the end of the input (", available,
                                " bytes follow the length prefix)"));
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes.data() + kLengthPrefixBytes);
  std::span<const std::byte> data = bytes.subspan(kLengthPrefixBytes + header_len);
  ASSIGN_OR_RETURN(const Json root, ParseHeaderJson(header_begin, header_len));

  SafetensorsFile file;
  std::vector<ParsedEntry> entries;
  entries.reserve(root.size());
  for (const auto& [name, value] : root.items()) {
    if (name == kMetadataKey) {
      ASSIGN_OR_RETURN(file.metadata_, ParseMetadata(value));
      continue;
    }
    ASSIGN_OR_RETURN(ParsedEntry entry, ParseEntry(name, value, data));
    entries.push_back(std::move(entry));
  }

  std::vector<const ParsedEntry*> pointers;
  pointers.reserve(entries.size());
  for (const ParsedEntry& e : entries) pointers.push_back(&e);
  RETURN_IF_ERROR(CheckCoverage(std::move(pointers), data.size()));

  for (ParsedEntry& e : entries) file.tensors_.emplace(std::move(e.name), std::move(e.view));
  file.holder_ = std::move(holder);
  return file;
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsWriter::SetMetadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

absl::Status SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape,
                                    std::span<const std::byte> data) {
  auto error = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors writer: tensor '", name, "': ", problem));
  };
  if (name.empty()) return absl::InvalidArgumentError("safetensors writer: empty tensor name");
  if (name == kMetadataKey) return error("the name is reserved for the metadata");
  if (entries_.contains(name)) return error("already added");
  if (DTypeSize(dtype) == 0) return error("invalid dtype value");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) return error(absl::StrCat("shape dim ", i, " is negative (", shape[i], ")"));
  }
  int64_t numel = 0;
  uint64_t needed = 0;
  if (!CheckedNumel(shape, &numel) || !CheckedByteSize(numel, dtype, &needed)) {
    return error(absl::StrCat("shape ", ShapeString(shape), " overflows the element count"));
  }
  if (data.size() != needed) {
    return error(absl::StrCat("data holds ", data.size(), " bytes but shape ", ShapeString(shape), " of ",
                              DTypeStr(dtype), " needs ", needed));
  }
  // Serialize() cannot fail, so a name that JSON cannot carry is refused here.
  try {
    (void)Json(name).dump();
  } catch (const Json::exception&) {
    return error("the name is not valid UTF-8");
  }
  Entry entry{dtype, std::move(shape), std::string(reinterpret_cast<const char*>(data.data()), data.size())};
  entries_.emplace(std::move(name), std::move(entry));
  return absl::OkStatus();
}

std::string SafetensorsWriter::Serialize() const {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& [name, entry] : entries_) {
    const uint64_t end = offset + entry.bytes.size();
    header[name] = {{"dtype", DTypeStr(entry.dtype)}, {"shape", entry.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata_.empty()) {
    Json metadata = Json::object();
    for (const auto& [key, value] : metadata_) metadata[key] = value;
    header[std::string(kMetadataKey)] = std::move(metadata);
  }
  // Metadata strings are not validated by SetMetadata (it cannot fail), so
  // invalid UTF-8 there is replaced instead of throwing.
  std::string json = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  // Padding makes the data section start 8-byte aligned in an aligned buffer.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(kLengthPrefixBytes + json.size() + offset);
  uint64_t len = json.size();
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  }
  out += json;
  for (const auto& [name, entry] : entries_) out += entry.bytes;
  return out;
}

absl::Status SafetensorsWriter::WriteFile(const std::string& path) const {
  return WriteFileAtomically(path, Serialize());
}

}  // namespace adapterd::model
