#include "server/model/serving_form.h"

#include <ATen/ATen.h>
#include <xxhash.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

constexpr std::string_view kMagic = "adsvform";
constexpr size_t kAlign = 64;
constexpr size_t kPrefixBytes = 16;  // magic, layout version, header length
constexpr size_t kDigestBytes = 8;
// More than any real set has (BERT-large: 24 layers, 292 tensors): bounds
// what a corrupt count could make the reader allocate.
constexpr uint32_t kMaxTensors = 1 << 16;
constexpr uint8_t kMaxRank = 4;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

uint64_t Digest(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Appends fixed-width little-endian fields (x86-64 and aarch64 are little-endian).
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void PutString(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }

 private:
  std::string& out_;
};

// Reads what Writer wrote; every read is bounds-checked, and the first
// failure sticks (ok() false).
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T Get() {
    T v{};
    if (!ok_ || in_.size() - pos_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string GetString() {
    const auto n = Get<uint32_t>();
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void PutConfig(Writer& w, const AdapterConfig& c) {
  w.Put(c.bottleneck_size);
  w.PutString(ActivationName(c.activation));
  w.Put(c.init_std);
  w.Put(static_cast<int32_t>(c.kind));  // TaskKind's numbers are the API's: stable
  w.Put(static_cast<uint32_t>(c.labels.size()));
  for (const std::string& l : c.labels) w.PutString(l);
  w.Put(c.target.mean);
  w.Put(c.target.stddev);
  w.Put(c.qa.max_seq_len);
  w.Put(c.qa.doc_stride);
  w.Put(c.qa.max_question_tokens);
  w.Put(c.qa.max_answer_tokens);
  w.Put(static_cast<uint8_t>(c.qa.allow_no_answer));
  w.Put(c.tagging_max_seq_len);
}

absl::StatusOr<AdapterConfig> GetConfig(Reader& r) {
  AdapterConfig c;
  c.bottleneck_size = r.Get<int64_t>();
  const std::string activation = r.GetString();
  c.init_std = r.Get<double>();
  const auto kind = r.Get<int32_t>();
  const auto num_labels = r.Get<uint32_t>();
  for (uint32_t i = 0; r.ok() && i < num_labels; ++i) c.labels.push_back(r.GetString());
  c.target.mean = r.Get<double>();
  c.target.stddev = r.Get<double>();
  c.qa.max_seq_len = r.Get<int32_t>();
  c.qa.doc_stride = r.Get<int32_t>();
  c.qa.max_question_tokens = r.Get<int32_t>();
  c.qa.max_answer_tokens = r.Get<int32_t>();
  c.qa.allow_no_answer = r.Get<uint8_t>() != 0;
  c.tagging_max_seq_len = r.Get<int32_t>();
  if (!r.ok()) return absl::InvalidArgumentError("the adapter config is truncated");
  ASSIGN_OR_RETURN(c.activation, ParseActivation(activation));
  if (kind < 1 || kind > static_cast<int32_t>(kNumTaskKinds)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown task kind ", kind));
  }
  c.kind = static_cast<TaskKind>(kind);
  RETURN_IF_ERROR(c.Validate());
  return c;
}

struct TensorEntry {
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The header after its identity fields: the config and the tensor table.
struct Layout {
  AdapterConfig config;
  std::vector<TensorEntry> tensors;
};

absl::StatusOr<Layout> GetLayout(Reader& r, size_t element_size, size_t blob_bytes) {
  Layout out;
  ASSIGN_OR_RETURN(out.config, GetConfig(r));
  const auto count = r.Get<uint32_t>();
  if (!r.ok() || count > kMaxTensors) return absl::InvalidArgumentError("bad tensor count");
  for (uint32_t i = 0; i < count; ++i) {
    TensorEntry t;
    const auto rank = r.Get<uint8_t>();
    if (rank > kMaxRank) return absl::InvalidArgumentError(absl::StrCat("tensor ", i, " has rank ", rank));
    uint64_t elements = 1;
    for (uint8_t d = 0; d < rank; ++d) {
      const auto dim = r.Get<int64_t>();
      if (dim < 0 || dim > (int64_t{1} << 32)) return absl::InvalidArgumentError("bad dimension");
      t.shape.push_back(dim);
      // No product may wrap: the byte check below then keeps every tensor
      // inside the blob.
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements) || elements > blob_bytes) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", i, " is too large"));
      }
    }
    t.offset = r.Get<uint64_t>();
    t.bytes = r.Get<uint64_t>();
    if (!r.ok()) return absl::InvalidArgumentError("the tensor table is truncated");
    if (t.bytes != elements * element_size || t.offset > blob_bytes - kDigestBytes ||
        t.bytes > blob_bytes - kDigestBytes - t.offset) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", i, "'s bytes are out of place"));
    }
    out.tensors.push_back(std::move(t));
  }
  if (!r.at_end()) return absl::InvalidArgumentError("the header has trailing bytes");
  return out;
}

}  // namespace

absl::StatusOr<std::string> EncodeServingForm(const AdapterSet& set, std::string_view source,
                                              std::string_view encoder_fingerprint, std::string_view canonical) {
  const c10::ScalarType dtype = set.dtype();
  if (dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16) {
    return absl::InvalidArgumentError("a serving form holds F32, F16 or BF16 tensors");
  }
  ASSIGN_OR_RETURN(DType file_dtype, FromScalarType(dtype));
  return GuardTorch("encode serving form", [&]() -> absl::StatusOr<std::string> {
    const std::vector<std::pair<std::string, at::Tensor>> named = set.Named();
    std::vector<at::Tensor> host;
    host.reserve(named.size());
    for (const auto& [name, t] : named) host.push_back(t.detach().to(at::kCPU).contiguous());

    std::string header;
    Writer h(header);
    h.PutString(DTypeName(file_dtype));
    h.PutString(source);
    h.PutString(encoder_fingerprint);
    h.Put(static_cast<int64_t>(set.layers().size()));
    h.Put(static_cast<int64_t>(set.head_weight().size(1)));
    h.Put(static_cast<uint64_t>(canonical.size()));
    h.Put(Digest(canonical));
    PutConfig(h, set.config());
    h.Put(static_cast<uint32_t>(host.size()));
    size_t offset = 0;  // relative to the data's start; made absolute below
    std::vector<size_t> offsets;
    for (const at::Tensor& t : host) {
      offsets.push_back(offset);
      offset = AlignUp(offset + t.nbytes());
    }
    // The header's length does not depend on the offsets' values.
    const size_t table_bytes = [&] {
      size_t n = 0;
      for (const at::Tensor& t : host) n += 1 + 8 * static_cast<size_t>(t.dim()) + 16;
      return n;
    }();
    const size_t data_start = AlignUp(kPrefixBytes + header.size() + table_bytes);
    for (size_t i = 0; i < host.size(); ++i) {
      h.Put(static_cast<uint8_t>(host[i].dim()));
      for (int64_t d : host[i].sizes()) h.Put(d);
      h.Put(static_cast<uint64_t>(data_start + offsets[i]));
      h.Put(static_cast<uint64_t>(host[i].nbytes()));
    }

    std::string out;
    out.reserve(data_start + offset + kDigestBytes);
    out.append(kMagic);
    Writer w(out);
    w.Put(static_cast<uint32_t>(kServingFormVersion));
    w.Put(static_cast<uint32_t>(header.size()));
    out.append(header);
    out.resize(data_start + offset, '\0');
    for (size_t i = 0; i < host.size(); ++i) {
      std::memcpy(out.data() + data_start + offsets[i], host[i].data_ptr(), host[i].nbytes());
    }
    w.Put(Digest(out));
    return out;
  });
}

absl::StatusOr<std::unique_ptr<AdapterSet>> DecodeServingForm(std::string_view bytes, const BertConfig& encoder_config,
                                                              c10::Device device,
                                                              const ServingFormExpectation& expect) {
  const std::string source(expect.source);
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat("serving form '", source, "' is corrupt: ", std::string(why)));
  };
  auto stale = [&](std::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat("serving form '", source, "' is stale: ", std::string(why)));
  };
  if (bytes.size() < kPrefixBytes + kDigestBytes) return corrupt(absl::StrCat("only ", bytes.size(), " bytes"));
  const std::string_view body = bytes.substr(0, bytes.size() - kDigestBytes);
  if (expect.verify_digest) {
    uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + body.size(), sizeof(stored));
    if (Digest(body) != stored) return corrupt("its XXH3-64 digest does not match its bytes");
  }
  if (body.substr(0, kMagic.size()) != kMagic) return corrupt("no serving-form magic");
  Reader prefix(body.substr(kMagic.size(), kPrefixBytes - kMagic.size()));
  const auto version = prefix.Get<uint32_t>();
  const auto header_bytes = prefix.Get<uint32_t>();
  if (version != kServingFormVersion) {
    return stale(absl::StrCat("layout version ", version, ", this build writes ", kServingFormVersion));
  }
  if (header_bytes > body.size() - kPrefixBytes) return corrupt("its header runs past its end");
  Reader r(body.substr(kPrefixBytes, header_bytes));
  const std::string dtype_name = r.GetString();
  const std::string made_from = r.GetString();
  const std::string fingerprint = r.GetString();
  const auto num_layers = r.Get<int64_t>();
  const auto hidden = r.Get<int64_t>();
  r.Get<uint64_t>();  // the canonical file's size and digest: provenance only
  r.Get<uint64_t>();
  if (!r.ok()) return corrupt("its header is truncated");
  absl::StatusOr<DType> file_dtype = ParseDType(dtype_name);
  absl::StatusOr<c10::ScalarType> scalar_type =
      file_dtype.ok() ? ToScalarType(*file_dtype) : absl::StatusOr<c10::ScalarType>(file_dtype.status());
  if (!scalar_type.ok()) return corrupt(std::string(scalar_type.status().message()));
  const c10::ScalarType dtype = *scalar_type;
  if (made_from != expect.source) return stale(absl::StrCat("it was made from '", made_from, "'"));
  if (fingerprint != expect.encoder_fingerprint) {
    return stale(absl::StrCat("it was made for model ", fingerprint, ", this server runs ",
                              std::string(expect.encoder_fingerprint)));
  }
  if (dtype != expect.dtype) {
    return stale(absl::StrCat("it holds ", dtype_name, ", this server serves ", c10::toString(expect.dtype)));
  }
  if (num_layers != encoder_config.num_hidden_layers || hidden != encoder_config.hidden_size) {
    return stale(absl::StrCat("it is for ", num_layers, " layers of width ", hidden));
  }
  absl::StatusOr<Layout> layout = GetLayout(r, c10::elementSize(dtype), bytes.size());
  if (!layout.ok()) return corrupt(std::string(layout.status().message()));

  ASSIGN_OR_RETURN(std::vector<at::Tensor> tensors,
                   GuardTorch("decode serving form", [&]() -> absl::StatusOr<std::vector<at::Tensor>> {
                     std::vector<at::Tensor> out;
                     out.reserve(layout->tensors.size());
                     const auto cpu = at::TensorOptions().dtype(dtype);
                     for (const TensorEntry& e : layout->tensors) {
                       at::Tensor t = at::empty(e.shape, cpu);
                       std::memcpy(t.data_ptr(), bytes.data() + e.offset, e.bytes);
                       out.push_back(device.is_cpu() ? std::move(t) : t.to(device));
                     }
                     return out;
                   }));
  absl::StatusOr<std::unique_ptr<AdapterSet>> set =
      AdapterSet::FromNamedOrder(encoder_config, std::move(layout->config), std::move(tensors));
  if (!set.ok()) return corrupt(std::string(set.status().message()));
  return set;
}

}  // namespace adapterd::model
