#include "server/model/torch_archive.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "common/zip_archive.h"

namespace adapterd::model {
namespace {

// Debian's Abseil has its own absl::string_view, which StrCat takes; a
// std::string_view goes through this.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("torch file: ", what));
}

// The storage classes a persistent id may name, and their element types.
constexpr std::array<std::pair<std::string_view, DType>, 10> kStorages{{
    {"torch.FloatStorage", DType::kF32},
    {"torch.DoubleStorage", DType::kF64},
    {"torch.HalfStorage", DType::kF16},
    {"torch.BFloat16Storage", DType::kBF16},
    {"torch.LongStorage", DType::kI64},
    {"torch.IntStorage", DType::kI32},
    {"torch.ShortStorage", DType::kI16},
    {"torch.CharStorage", DType::kI8},
    {"torch.ByteStorage", DType::kU8},
    {"torch.BoolStorage", DType::kBool},
}};

std::optional<DType> StorageDType(std::string_view global) {
  for (const auto& [name, dtype] : kStorages) {
    if (name == global) return dtype;
  }
  return std::nullopt;
}

// The storage class of `dtype` ("torch.FloatStorage").
std::string_view StorageClass(DType dtype) {
  for (const auto& [name, d] : kStorages) {
    if (d == dtype) return name;
  }
  return {};
}

constexpr std::string_view kOrderedDict = "collections.OrderedDict";
constexpr std::string_view kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr std::string_view kRebuildParameter = "torch._utils._rebuild_parameter";

// The pickle interpreter. Values live in one arena and refer to each other
// by index, so that shared references (the memo) cost nothing and a cycle
// cannot leak or loop.
class Unpickler {
 public:
  Unpickler(std::string_view pickle, const TorchStorageLoader& load) : in_(pickle), load_(load) {}

  absl::StatusOr<std::map<std::string, TensorView, std::less<>>> Run(std::shared_ptr<const void>* holder) {
    ASSIGN_OR_RETURN(int32_t top, Interpret());
    const Value& root = values_[static_cast<size_t>(top)];
    if (root.kind != Kind::kDict) {
      return Malformed("the saved object is not a dict of tensors (a state dict)");
    }
    std::map<std::string, TensorView, std::less<>> out;
    for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
      const Value& key = values_[static_cast<size_t>(root.items[i])];
      const Value& value = values_[static_cast<size_t>(root.items[i + 1])];
      if (key.kind != Kind::kString || key.text.empty() || !IsValidUtf8(key.text)) {
        return Malformed("a state dict key is not a non-empty UTF-8 string");
      }
      if (value.kind != Kind::kTensor) {
        return Malformed(absl::StrCat("entry '", key.text, "' is not a tensor"));
      }
      if (!out.emplace(key.text, value.tensor).second) {
        return Malformed(absl::StrCat("tensor '", key.text, "' appears twice"));
      }
    }
    auto keep = std::make_shared<std::vector<std::shared_ptr<const std::string>>>(std::move(buffers_));
    *holder = keep;
    return out;
  }

 private:
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  struct Value {
    Kind kind = Kind::kNone;
    int64_t number = 0;          // kInt, kBool; kStorage: its index in storages_
    std::string text;            // kString; kGlobal: "module.name"
    std::vector<int32_t> items;  // kTuple, kList; kDict: key, value, key, value, ...
    TensorView tensor{};         // kTensor
  };
  struct Storage {
    TorchStorageRef ref;
    std::shared_ptr<const std::string> bytes;
  };

  int32_t Add(Value v) {
    values_.push_back(std::move(v));
    return static_cast<int32_t>(values_.size() - 1);
  }
  Value& At(int32_t i) { return values_[static_cast<size_t>(i)]; }

  absl::StatusOr<std::string_view> Take(size_t n) {
    if (in_.size() - pos_ < n) return Malformed("the pickle ends early");
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  template <typename T>
  absl::StatusOr<T> TakeLittle() {
    ASSIGN_OR_RETURN(std::string_view b, Take(sizeof(T)));
    T v;
    std::memcpy(&v, b.data(), sizeof(T));  // x86-64 and aarch64 are little-endian
    return v;
  }
  absl::StatusOr<std::string_view> TakeLine() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) return Malformed("the pickle ends early");
    std::string_view out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  absl::StatusOr<int32_t> Pop() {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Malformed("the pickle pops an empty stack");
    const int32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<int32_t> Top() {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Malformed("the pickle reads an empty stack");
    return stack_.back();
  }
  // The values above the last MARK, which is removed.
  absl::StatusOr<std::vector<int32_t>> PopToMark() {
    if (marks_.empty()) return Malformed("the pickle has no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<int32_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return out;
  }
  absl::StatusOr<int32_t> PopTuple(size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) return Malformed("the pickle pops an empty stack");
    Value t{.kind = Kind::kTuple};
    t.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return Add(std::move(t));
  }

  absl::Status Memoize(uint32_t index) {
    ASSIGN_OR_RETURN(int32_t top, Top());
    memo_[index] = top;
    return absl::OkStatus();
  }
  absl::Status Recall(uint32_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Malformed(absl::StrCat("the pickle reads memo entry ", index, ", never stored"));
    stack_.push_back(it->second);
    return absl::OkStatus();
  }

  absl::Status PushGlobal(const std::string& module, std::string_view name) {
    std::string full = absl::StrCat(module, ".", Sv(name));
    if (full != kOrderedDict && full != kRebuildTensor && full != kRebuildParameter && !StorageDType(full)) {
      return Malformed(absl::StrCat("refused global '", ToValidUtf8(full),
                                    "': a state dict of tensors names only torch's tensor and storage "
                                    "rebuilders and collections.OrderedDict"));
    }
    stack_.push_back(Add(Value{.kind = Kind::kGlobal, .text = std::move(full)}));
    return absl::OkStatus();
  }

  absl::Status AddItems(int32_t target, const std::vector<int32_t>& items, bool pairs) {
    Value& t = At(target);
    if (pairs ? t.kind != Kind::kDict : t.kind != Kind::kList) {
      return Malformed(pairs ? "SETITEM(S) on something that is not a dict"
                             : "APPEND(S) on something that is not a list");
    }
    if (pairs && items.size() % 2 != 0) return Malformed("SETITEMS with an odd number of values");
    t.items.insert(t.items.end(), items.begin(), items.end());
    return absl::OkStatus();
  }

  // ('storage', torch.<Kind>Storage, key, location, count) -> a storage.
  absl::StatusOr<int32_t> PersistentLoad(int32_t pid) {
    const Value& id = At(pid);
    if (id.kind != Kind::kTuple || id.items.size() != 5 || At(id.items[0]).kind != Kind::kString ||
        At(id.items[0]).text != "storage") {
      return Malformed("a persistent id that is not ('storage', type, key, location, size)");
    }
    const Value& type = At(id.items[1]);
    const Value& key = At(id.items[2]);
    const Value& count = At(id.items[4]);
    std::optional<DType> dtype = type.kind == Kind::kGlobal ? StorageDType(type.text) : std::nullopt;
    if (!dtype || key.kind != Kind::kString || At(id.items[3]).kind != Kind::kString || count.kind != Kind::kInt ||
        count.number < 0) {
      return Malformed("a storage persistent id with a wrong type, key, location or size");
    }
    auto it = storage_index_.find(key.text);
    if (it != storage_index_.end()) {
      const TorchStorageRef& seen = storages_[it->second].ref;
      if (seen.dtype != *dtype || seen.count != count.number) {
        return Malformed(absl::StrCat("storage '", ToValidUtf8(key.text), "' is named with two types or sizes"));
      }
    } else {
      TorchStorageRef ref{key.text, *dtype, count.number};
      ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, load_(ref));
      const uint64_t want = static_cast<uint64_t>(count.number) * DTypeSize(*dtype);
      if (count.number > std::numeric_limits<int64_t>::max() / 8 || !bytes || bytes->size() != want) {
        return Malformed(absl::StrCat("storage '", ToValidUtf8(key.text), "' does not hold ", count.number,
                                      " elements of ", Sv(DTypeName(*dtype))));
      }
      buffers_.push_back(bytes);
      storages_.push_back({std::move(ref), std::move(bytes)});
      it = storage_index_.emplace(key.text, storages_.size() - 1).first;
    }
    return Add(Value{.kind = Kind::kStorage, .number = static_cast<int64_t>(it->second)});
  }

  absl::StatusOr<std::vector<int64_t>> Ints(int32_t tuple, absl::string_view what) {
    const Value& t = At(tuple);
    if (t.kind != Kind::kTuple) return Malformed(absl::StrCat("a tensor's ", what, " is not a tuple"));
    std::vector<int64_t> out;
    for (int32_t i : t.items) {
      if (At(i).kind != Kind::kInt || At(i).number < 0) {
        return Malformed(absl::StrCat("a tensor's ", what, " holds something other than a non-negative integer"));
      }
      out.push_back(At(i).number);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]).
  absl::StatusOr<int32_t> RebuildTensor(const Value& args) {
    if (args.items.size() < 6 || args.items.size() > 7 || At(args.items[0]).kind != Kind::kStorage ||
        At(args.items[1]).kind != Kind::kInt) {
      return Malformed("_rebuild_tensor_v2 with arguments other than (storage, offset, size, stride, ...)");
    }
    const Storage& storage = storages_[static_cast<size_t>(At(args.items[0]).number)];
    const int64_t offset = At(args.items[1]).number;
    ASSIGN_OR_RETURN(std::vector<int64_t> size, Ints(args.items[2], "size"));
    ASSIGN_OR_RETURN(std::vector<int64_t> stride, Ints(args.items[3], "stride"));
    if (size.size() != stride.size() || size.size() > 16) {
      return Malformed("a tensor's size and stride differ in length (or exceed 16 dimensions)");
    }
    const int64_t count = storage.ref.count;
    // numel, and the last element's index: in the storage, and no more
    // elements than it holds (a broadcast view, stride 0, would otherwise
    // make the copy below a memory bomb).
    int64_t numel = 1, last = offset;
    bool overflow = offset < 0;
    for (size_t d = 0; d < size.size(); ++d) {
      overflow = overflow || __builtin_mul_overflow(numel, size[d], &numel);
    }
    if (!overflow && numel != 0) {
      for (size_t d = 0; d < size.size(); ++d) {
        int64_t reach = 0;
        overflow = overflow || __builtin_mul_overflow(size[d] - 1, stride[d], &reach) ||
                   __builtin_add_overflow(last, reach, &last);
      }
    }
    if (overflow || (numel != 0 && last >= count) || numel > count) {
      return Malformed(absl::StrCat("a tensor of shape [", absl::StrJoin(size, ","), "] (storage offset ", offset,
                                    ") reaches past its storage of ", count,
                                    " elements (a broadcast view: save it with .contiguous())"));
    }
    const size_t elem = DTypeSize(storage.ref.dtype);
    TensorView view{storage.ref.dtype, size, {}};
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t d = size.size(); d-- > 0;) {
      if (size[d] != 1 && stride[d] != expect) contiguous = false;
      expect *= size[d];
    }
    const auto* base = reinterpret_cast<const std::byte*>(storage.bytes->data());
    if (numel == 0) {
      view.data = {};
    } else if (contiguous) {
      view.data =
          std::span<const std::byte>(base + static_cast<size_t>(offset) * elem, static_cast<size_t>(numel) * elem);
    } else {
      // A strided tensor: copied out in row-major order. numel <= the
      // storage's count times the dimensions, so the copy is bounded too.
      auto copy = std::make_shared<std::string>(static_cast<size_t>(numel) * elem, '\0');
      std::vector<int64_t> index(size.size(), 0);
      for (int64_t n = 0; n < numel; ++n) {
        int64_t at = offset;
        for (size_t d = 0; d < size.size(); ++d) at += index[d] * stride[d];
        std::memcpy(copy->data() + static_cast<size_t>(n) * elem, base + static_cast<size_t>(at) * elem, elem);
        for (size_t d = size.size(); d-- > 0;) {
          if (++index[d] < size[d]) break;
          index[d] = 0;
        }
      }
      view.data = std::span<const std::byte>(reinterpret_cast<const std::byte*>(copy->data()), copy->size());
      buffers_.push_back(std::move(copy));
    }
    return Add(Value{.kind = Kind::kTensor, .tensor = std::move(view)});
  }

  absl::StatusOr<int32_t> Reduce(int32_t callable, int32_t args) {
    const Value& fn = At(callable);
    const Value& a = At(args);
    if (fn.kind != Kind::kGlobal || a.kind != Kind::kTuple) return Malformed("REDUCE of something not callable");
    if (fn.text == kOrderedDict) {
      if (!a.items.empty()) return Malformed("OrderedDict rebuilt with arguments");
      return Add(Value{.kind = Kind::kDict});
    }
    if (fn.text == kRebuildTensor) return RebuildTensor(a);
    if (fn.text == kRebuildParameter) {
      if (a.items.empty() || At(a.items[0]).kind != Kind::kTensor) {
        return Malformed("_rebuild_parameter without a tensor");
      }
      return a.items[0];
    }
    return Malformed(absl::StrCat("refused call of '", ToValidUtf8(fn.text), "'"));
  }

  // Runs opcodes until STOP and returns the value STOP pops. Each step
  // handles one family of opcodes and answers false for the others.
  absl::StatusOr<int32_t> Interpret() {
    using Step = absl::StatusOr<bool> (Unpickler::*)(unsigned char);
    static constexpr Step kSteps[] = {&Unpickler::Framing, &Unpickler::Literal, &Unpickler::Container, &Unpickler::Call,
                                      &Unpickler::Memo};
    while (true) {
      ASSIGN_OR_RETURN(std::string_view op, Take(1));
      const auto code = static_cast<unsigned char>(op[0]);
      if (code == '.') {  // STOP
        if (pos_ != in_.size()) return Malformed("bytes follow the pickle's STOP");
        return Pop();
      }
      bool handled = false;
      for (Step step : kSteps) {
        ASSIGN_OR_RETURN(handled, (this->*step)(code));
        if (handled) break;
      }
      if (!handled) {
        return Malformed(
            absl::StrFormat("pickle opcode 0x%02x at byte %d is not one torch.save writes", code, pos_ - 1));
      }
    }
  }

  // PROTO, FRAME (a length hint) and MARK.
  absl::StatusOr<bool> Framing(unsigned char code) {
    switch (code) {
      case 0x80: {  // PROTO
        ASSIGN_OR_RETURN(std::string_view v, Take(1));
        if (static_cast<unsigned char>(v[0]) < 2 || static_cast<unsigned char>(v[0]) > 5) {
          return Malformed(
              absl::StrCat("pickle protocol ", static_cast<int>(static_cast<unsigned char>(v[0])), " is not 2-5"));
        }
        return true;
      }
      case 0x95:  // FRAME
        RETURN_IF_ERROR(Take(8).status());
        return true;
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return true;
      default:
        return false;
    }
  }

  // None, booleans, integers, floats, strings and globals: pushed.
  absl::StatusOr<bool> Literal(unsigned char code) {
    Value v;
    switch (code) {
      case 'N':
        break;
      case 0x88:  // NEWTRUE
      case 0x89:  // NEWFALSE
        v = Value{.kind = Kind::kBool, .number = code == 0x88 ? 1 : 0};
        break;
      case 'K': {
        ASSIGN_OR_RETURN(uint8_t n, TakeLittle<uint8_t>());
        v = Value{.kind = Kind::kInt, .number = n};
        break;
      }
      case 'M': {
        ASSIGN_OR_RETURN(uint16_t n, TakeLittle<uint16_t>());
        v = Value{.kind = Kind::kInt, .number = n};
        break;
      }
      case 'J': {
        ASSIGN_OR_RETURN(int32_t n, TakeLittle<int32_t>());
        v = Value{.kind = Kind::kInt, .number = n};
        break;
      }
      case 0x8a: {  // LONG1: n little-endian two's-complement bytes
        ASSIGN_OR_RETURN(uint8_t n, TakeLittle<uint8_t>());
        if (n > 8) return Malformed("an integer wider than 64 bits");
        ASSIGN_OR_RETURN(std::string_view b, Take(n));
        uint64_t u = 0;
        for (size_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(static_cast<unsigned char>(b[i])) << (8 * i);
        if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);
        v = Value{.kind = Kind::kInt, .number = static_cast<int64_t>(u)};
        break;
      }
      case 'G': {  // BINFLOAT, big-endian
        ASSIGN_OR_RETURN(uint64_t bits, TakeLittle<uint64_t>());
        v = Value{.kind = Kind::kFloat, .number = static_cast<int64_t>(__builtin_bswap64(bits))};
        break;
      }
      case 'X':
      case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
        ASSIGN_OR_RETURN(uint32_t n, TakeIndex(/*wide=*/code == 'X'));
        ASSIGN_OR_RETURN(std::string_view s, Take(n));
        v = Value{.kind = Kind::kString, .text = std::string(s)};
        break;
      }
      case 'c': {  // GLOBAL module\nname\n
        ASSIGN_OR_RETURN(std::string_view module, TakeLine());
        ASSIGN_OR_RETURN(std::string_view name, TakeLine());
        RETURN_IF_ERROR(PushGlobal(std::string(module), name));
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        ASSIGN_OR_RETURN(int32_t name, Pop());
        ASSIGN_OR_RETURN(int32_t module, Pop());
        if (At(name).kind != Kind::kString || At(module).kind != Kind::kString) {
          return Malformed("STACK_GLOBAL of something other than two strings");
        }
        RETURN_IF_ERROR(PushGlobal(At(module).text, At(name).text));
        return true;
      }
      default:
        return false;
    }
    stack_.push_back(Add(std::move(v)));
    return true;
  }

  // Empty and MARK-built tuples, lists and dicts, and adding to them.
  absl::StatusOr<bool> Container(unsigned char code) {
    switch (code) {
      case '}':
      case ']':
      case ')':
        stack_.push_back(Add(Value{.kind = code == '}' ? Kind::kDict : code == ']' ? Kind::kList : Kind::kTuple}));
        return true;
      case 't':
      case 'l':
      case 'd': {  // TUPLE, LIST, DICT from the values above a MARK
        ASSIGN_OR_RETURN(std::vector<int32_t> items, PopToMark());
        if (code == 'd' && items.size() % 2 != 0) return Malformed("DICT with an odd number of values");
        stack_.push_back(Add(Value{.kind = code == 't'   ? Kind::kTuple
                                           : code == 'l' ? Kind::kList
                                                         : Kind::kDict,
                                   .items = std::move(items)}));
        return true;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1-3
        ASSIGN_OR_RETURN(int32_t t, PopTuple(static_cast<size_t>(code - 0x84)));
        stack_.push_back(t);
        return true;
      }
      case 'a': {  // APPEND
        ASSIGN_OR_RETURN(int32_t v, Pop());
        ASSIGN_OR_RETURN(int32_t list, Top());
        RETURN_IF_ERROR(AddItems(list, {v}, false));
        return true;
      }
      case 'e':
      case 'u': {  // APPENDS, SETITEMS
        ASSIGN_OR_RETURN(std::vector<int32_t> items, PopToMark());
        ASSIGN_OR_RETURN(int32_t target, Top());
        RETURN_IF_ERROR(AddItems(target, items, code == 'u'));
        return true;
      }
      case 's': {  // SETITEM
        ASSIGN_OR_RETURN(int32_t v, Pop());
        ASSIGN_OR_RETURN(int32_t k, Pop());
        ASSIGN_OR_RETURN(int32_t dict, Top());
        RETURN_IF_ERROR(AddItems(dict, {k, v}, true));
        return true;
      }
      default:
        return false;
    }
  }

  // REDUCE (one of the allowed globals), BUILD (a dict's instance state, a
  // state dict's _metadata: dropped) and BINPERSID (a storage).
  absl::StatusOr<bool> Call(unsigned char code) {
    switch (code) {
      case 'R': {
        ASSIGN_OR_RETURN(int32_t args, Pop());
        ASSIGN_OR_RETURN(int32_t fn, Pop());
        ASSIGN_OR_RETURN(int32_t out, Reduce(fn, args));
        stack_.push_back(out);
        return true;
      }
      case 'b': {
        ASSIGN_OR_RETURN(int32_t state, Pop());
        ASSIGN_OR_RETURN(int32_t target, Top());
        if (At(target).kind != Kind::kDict || At(state).kind != Kind::kDict) {
          return Malformed("BUILD of something other than a dict's state");
        }
        return true;
      }
      case 'Q': {
        ASSIGN_OR_RETURN(int32_t pid, Pop());
        ASSIGN_OR_RETURN(int32_t storage, PersistentLoad(pid));
        stack_.push_back(storage);
        return true;
      }
      default:
        return false;
    }
  }

  // BINPUT / LONG_BINPUT / MEMOIZE store the top; BINGET / LONG_BINGET push
  // a stored value.
  absl::StatusOr<bool> Memo(unsigned char code) {
    if (code == 0x94) {  // MEMOIZE: the next free index
      RETURN_IF_ERROR(Memoize(static_cast<uint32_t>(memo_.size())));
      return true;
    }
    if (code != 'q' && code != 'r' && code != 'h' && code != 'j') return false;
    ASSIGN_OR_RETURN(uint32_t index, TakeIndex(/*wide=*/code == 'r' || code == 'j'));
    RETURN_IF_ERROR(code == 'q' || code == 'r' ? Memoize(index) : Recall(index));
    return true;
  }

  // A one-byte, or (wide) four-byte little-endian, count or index.
  absl::StatusOr<uint32_t> TakeIndex(bool wide) {
    if (wide) return TakeLittle<uint32_t>();
    ASSIGN_OR_RETURN(uint8_t n, TakeLittle<uint8_t>());
    return n;
  }

  std::string_view in_;
  size_t pos_ = 0;
  const TorchStorageLoader& load_;
  std::vector<Value> values_;
  std::vector<int32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, int32_t> memo_;
  std::vector<Storage> storages_;
  std::unordered_map<std::string, size_t> storage_index_;
  std::vector<std::shared_ptr<const std::string>> buffers_;
};

bool LooksLikeLegacyTorchSave(std::string_view head) {
  // The pre-1.6 format starts with the pickled magic number: PROTO 2, LONG1 10.
  return head.size() >= 4 && head.substr(0, 4) == std::string_view("\x80\x02\x8a\x0a", 4);
}

// A reader's failure as this file's kind of error: "torch file: ...".
absl::Status AsMalformed(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument ? Malformed(s.message()) : s;
}

absl::StatusOr<std::map<std::string, TensorView, std::less<>>> ReadZip(const ZipReader& zip,
                                                                       const TorchArchiveLimits& limits,
                                                                       std::shared_ptr<const void>* holder) {
  const int64_t entries = zip.num_entries();
  std::optional<uint64_t> pickle_index;
  std::string prefix;
  for (int64_t i = 0; i < entries; ++i) {
    const std::optional<std::string_view> name = zip.Name(static_cast<uint64_t>(i));
    if (!name.has_value()) continue;
    const std::string_view n = *name;
    constexpr std::string_view kPkl = "/data.pkl";
    if (n.size() > kPkl.size() && n.substr(n.size() - kPkl.size()) == kPkl &&
        n.substr(0, n.size() - kPkl.size()).find('/') == std::string_view::npos) {
      if (pickle_index) return Malformed("the archive holds more than one data.pkl");
      pickle_index = static_cast<uint64_t>(i);
      prefix = std::string(n.substr(0, n.size() - kPkl.size()));
    }
  }
  if (!pickle_index) return Malformed("the archive holds no <name>/data.pkl: not a torch.save file");

  auto size_of = [&](uint64_t index) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<uint64_t> size = zip.Size(index);
    if (!size.ok()) return AsMalformed(size.status());
    return size;
  };
  auto read = [&](uint64_t index, const std::string& name) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> bytes = zip.Read(index, name);
    if (!bytes.ok()) return AsMalformed(bytes.status());
    return bytes;
  };
  const std::string byteorder_name = prefix + "/byteorder";
  if (const std::optional<uint64_t> bo = zip.Locate(byteorder_name); bo.has_value()) {
    ASSIGN_OR_RETURN(const uint64_t size, size_of(*bo));
    if (size > 16) return Malformed("the byteorder entry is not 'little'");
    ASSIGN_OR_RETURN(std::string order, read(*bo, byteorder_name));
    if (order != "little") {
      return Malformed(absl::StrCat("byte order '", ToValidUtf8(order), "' (only little-endian files are read)"));
    }
  }
  ASSIGN_OR_RETURN(const uint64_t pickle_size, size_of(*pickle_index));
  if (pickle_size > limits.max_pickle_bytes) {
    return Malformed(absl::StrCat("data.pkl is ", pickle_size, " bytes, over the limit of ", limits.max_pickle_bytes));
  }
  ASSIGN_OR_RETURN(std::string pickle, read(*pickle_index, "data.pkl"));

  uint64_t total = 0;
  TorchStorageLoader load = [&](const TorchStorageRef& ref) -> absl::StatusOr<std::shared_ptr<const std::string>> {
    const std::string name = absl::StrCat(prefix, "/data/", ref.key);
    const std::optional<uint64_t> index = zip.Locate(name);
    if (!index.has_value()) return Malformed(absl::StrCat("storage entry '", ToValidUtf8(name), "' is missing"));
    ASSIGN_OR_RETURN(const uint64_t size, size_of(*index));
    const uint64_t elem = DTypeSize(ref.dtype);
    if (static_cast<uint64_t>(ref.count) > limits.max_storage_bytes / elem ||
        size != static_cast<uint64_t>(ref.count) * elem) {
      return Malformed(absl::StrCat("storage entry '", ToValidUtf8(name), "' is ", size, " bytes, not ", ref.count,
                                    " elements of ", Sv(DTypeName(ref.dtype))));
    }
    total += size;
    if (total > limits.max_storage_bytes) {
      return Malformed(absl::StrCat("the tensors exceed the limit of ", limits.max_storage_bytes, " bytes"));
    }
    ASSIGN_OR_RETURN(std::string bytes, read(*index, name));
    return std::make_shared<const std::string>(std::move(bytes));
  };
  return UnpickleStateDict(pickle, load, holder);
}

// Why `what` could not be opened as a zip: the pre-1.6 format named as such.
absl::Status OpenError(std::string_view what, const absl::Status& status, bool not_a_zip, std::string_view head) {
  if (not_a_zip && LooksLikeLegacyTorchSave(head)) {
    return Malformed(absl::StrCat(Sv(what),
                                  " is in the pre-1.6 torch.save format, which is not read: save it again with "
                                  "PyTorch 1.6 or later, or convert it to safetensors"));
  }
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  return Malformed(absl::StrCat(Sv(what), " is not a torch.save zip archive (", status.message(), ")"));
}

}  // namespace

absl::StatusOr<std::map<std::string, TensorView, std::less<>>> UnpickleStateDict(std::string_view pickle,
                                                                                 const TorchStorageLoader& load,
                                                                                 std::shared_ptr<const void>* holder) {
  return Unpickler(pickle, load).Run(holder);
}

const TensorView* TorchArchive::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<TorchArchive> TorchArchive::Open(const std::string& path, const TorchArchiveLimits& limits) {
  bool not_a_zip = false;
  absl::StatusOr<ZipReader> zip = ZipReader::Open(path, &not_a_zip);
  if (absl::IsNotFound(zip.status())) return zip.status();
  if (!zip.ok()) {
    std::ifstream in(path, std::ios::binary);
    std::string head(4, '\0');
    in.read(head.data(), 4);
    head.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    return OpenError(path, zip.status(), not_a_zip, head);
  }
  TorchArchive out;
  auto tensors = ReadZip(*zip, limits, &out.holder_);
  if (!tensors.ok()) {
    return absl::Status(tensors.status().code(), absl::StrCat(path, ": ", tensors.status().message()));
  }
  out.tensors_ = *std::move(tensors);
  return out;
}

absl::StatusOr<TorchArchive> TorchArchive::FromBytes(std::string_view bytes, const TorchArchiveLimits& limits) {
  bool not_a_zip = false;
  absl::StatusOr<ZipReader> zip = ZipReader::FromBytes(bytes, &not_a_zip);
  if (!zip.ok()) return OpenError("the file", zip.status(), not_a_zip, bytes.substr(0, 4));
  TorchArchive out;
  ASSIGN_OR_RETURN(out.tensors_, ReadZip(*zip, limits, &out.holder_));
  return out;
}

namespace {

// The pickle opcodes the writer emits (pickletools' names).
class PickleWriter {
 public:
  PickleWriter() { out_ = "\x80\x02"; }  // PROTO 2
  void Raw(std::string_view op) { out_ += op; }
  void Global(std::string_view dotted) {  // GLOBAL 'module\nname\n'
    const size_t dot = dotted.rfind('.');
    absl::StrAppend(&out_, "c", Sv(dotted.substr(0, dot)), "\n", Sv(dotted.substr(dot + 1)), "\n");
  }
  void String(std::string_view s) {  // BINUNICODE
    out_ += 'X';
    Little(static_cast<uint32_t>(s.size()), 4);
    out_ += s;
  }
  void Int(int64_t v) {
    if (v >= 0 && v < 256) {  // BININT1
      out_ += 'K';
      Little(static_cast<uint64_t>(v), 1);
    } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {  // BININT
      out_ += 'J';
      Little(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {  // LONG1, 8 bytes of two's complement
      out_ += "\x8a\x08";
      Little(static_cast<uint64_t>(v), 8);
    }
  }
  void IntTuple(std::span<const int64_t> values) {
    out_ += '(';  // MARK
    for (int64_t v : values) Int(v);
    out_ += 't';  // TUPLE
  }
  std::string Finish() && {
    out_ += '.';  // STOP
    return std::move(out_);
  }

 private:
  void Little(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> WriteTorchStateDict(const std::map<std::string, TensorView, std::less<>>& tensors) {
  constexpr std::string_view kPrefix = "archive";
  ZipFiles files;
  PickleWriter p;
  p.Raw("}");  // EMPTY_DICT
  if (!tensors.empty()) p.Raw("(");
  int64_t key = 0;
  for (const auto& [name, view] : tensors) {
    int64_t numel = 1;
    for (int64_t d : view.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has a negative dimension"));
      numel *= d;
    }
    if (view.data.size() != static_cast<uint64_t>(numel) * DTypeSize(view.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' holds ", view.data.size(), " bytes, not ",
                                                     numel, " elements of ", Sv(DTypeName(view.dtype))));
    }
    std::vector<int64_t> strides(view.shape.size());
    int64_t stride = 1;
    for (size_t i = view.shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= std::max<int64_t>(view.shape[i], 1);
    }
    p.String(name);
    p.Global(kRebuildTensor);
    p.Raw("((");  // MARK (the call's arguments), MARK (the persistent id)
    p.String("storage");
    p.Global(StorageClass(view.dtype));
    p.String(absl::StrCat(key));
    p.String("cpu");
    p.Int(numel);
    p.Raw("tQ");  // TUPLE, BINPERSID
    p.Int(0);     // storage offset
    p.IntTuple(view.shape);
    p.IntTuple(strides);
    p.Raw("\x89");  // NEWFALSE: requires_grad
    p.Global(kOrderedDict);
    p.Raw(")RtR");  // EMPTY_TUPLE, REDUCE: backward hooks; TUPLE, REDUCE: the tensor
    files.emplace(absl::StrCat(Sv(kPrefix), "/data/", key),
                  std::string(reinterpret_cast<const char*>(view.data.data()), view.data.size()));
    ++key;
  }
  if (!tensors.empty()) p.Raw("u");  // SETITEMS
  files.emplace(absl::StrCat(Sv(kPrefix), "/data.pkl"), std::move(p).Finish());
  files.emplace(absl::StrCat(Sv(kPrefix), "/version"), "3\n");
  files.emplace(absl::StrCat(Sv(kPrefix), "/byteorder"), "little");
  return WriteZipFiles(files);
}

}  // namespace adapterd::model
