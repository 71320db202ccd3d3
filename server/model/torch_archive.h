// A safe reader for PyTorch's torch.save files holding a state dict: the
// `pytorch_model.bin` of a HuggingFace directory, and the
// `pytorch_adapter.bin` / `pytorch_model_head.bin` that AdapterHub's
// `adapters` library writes (docs/ADAPTER_FORMAT.md, "PyTorch files").
//
// What the file is (torch.save since PyTorch 1.6): a zip archive with
//   <prefix>/data.pkl     a Python pickle of the object saved;
//   <prefix>/data/<key>   one entry per tensor storage, its raw bytes;
//   <prefix>/byteorder    "little" (absent in files before PyTorch 1.12);
// plus <prefix>/version and, from PyTorch 2, .data/serialization_id. The
// pickle refers to storages by persistent id
//   ('storage', torch.<Kind>Storage, key, location, element count)
// and rebuilds each tensor with torch._utils._rebuild_tensor_v2(storage,
// storage offset, size, stride, requires_grad, backward hooks).
//
// Why a reader of our own: Python's unpickler (and LibTorch's) can call any
// importable function a file names, so a file is a program. This one is an
// interpreter of the pickle opcodes that torch.save emits (protocol 2, plus
// protocol 4's framing, short strings, MEMOIZE and STACK_GLOBAL) that
// resolves exactly these globals and refuses every other one by name:
//   collections.OrderedDict                 (an ordered dict; BUILD state ignored)
//   torch._utils._rebuild_tensor_v2         (a tensor over a storage)
//   torch._utils._rebuild_parameter         (nn.Parameter: its tensor)
//   torch.{Float,Double,Half,BFloat16,Long,Int,Short,Char,Byte,Bool}Storage
// It calls nothing, keeps its values in one arena (no recursion, no
// reference cycles), and does work linear in the pickle's length. The zip
// container is read with libzip (Debian's libzip4).
//
// Refused, with INVALID_ARGUMENT naming the problem (never a crash, fuzzed
// by tests/fuzz/torch_pickle_fuzzer.cc): the pre-1.6 (non-zip) format, an
// archive without exactly one data.pkl, a byteorder other than "little",
// an unknown opcode or global, a malformed or truncated pickle, a storage
// entry missing or of another size than its element count says, a tensor
// whose size/stride/offset reach past its storage, a top-level object that
// is not a dict of string -> tensor, a duplicate name, and a pickle or a
// total of storage bytes over TorchArchiveLimits.
//
// Output: every tensor as a contiguous TensorView (safetensors.h), so that
// callers treat both formats alike (tensor_io.h's ViewToTensor). A tensor
// stored contiguously is a view into its storage's bytes; a strided one
// (a transposed view saved as such) is copied out once. Tensors that share
// a storage share its bytes.
//
// Thread safety: TorchArchive is immutable after construction; any number
// of threads may read it.
#ifndef ADAPTERD_SERVER_MODEL_TORCH_ARCHIVE_H_
#define ADAPTERD_SERVER_MODEL_TORCH_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/safetensors.h"

namespace adapterd::model {

struct TorchArchiveLimits {
  // Largest accepted data.pkl (a BERT-large state dict's is ~30 KB).
  uint64_t max_pickle_bytes = 16ull << 20;
  // Largest sum of the storages' bytes (BERT-large fp32 is ~1.3 GB).
  uint64_t max_storage_bytes = 8ull << 30;
};

class TorchArchive {
 public:
  // Reads the torch.save file at `path`. NOT_FOUND when it does not exist.
  static absl::StatusOr<TorchArchive> Open(const std::string& path, const TorchArchiveLimits& limits = {});
  // Parses a file held in memory (copied as needed; `bytes` need not outlive
  // the call).
  static absl::StatusOr<TorchArchive> FromBytes(std::string_view bytes, const TorchArchiveLimits& limits = {});

  // All tensors, by name (sorted).
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* Find(std::string_view name) const;
  // Keeps the tensors' bytes alive; share it with anything that borrows them.
  const std::shared_ptr<const void>& holder() const { return holder_; }

 private:
  TorchArchive() = default;

  std::map<std::string, TensorView, std::less<>> tensors_;
  std::shared_ptr<const void> holder_;
};

// One storage as the pickle names it: the zip entry's key, its element type
// and count. The loader returns its bytes (exactly count * DTypeSize(dtype)
// of them, or an error).
struct TorchStorageRef {
  std::string key;
  DType dtype;
  int64_t count;
};
using TorchStorageLoader = std::function<absl::StatusOr<std::shared_ptr<const std::string>>(const TorchStorageRef&)>;

// The tensors of a state-dict pickle, each a contiguous view, with the
// storages fetched through `load` (once per key). TorchArchive runs this
// over its data.pkl; exposed for the fuzz harness and the tests, which feed
// it pickles without a zip around them. `holder` receives what keeps the
// views' bytes alive.
absl::StatusOr<std::map<std::string, TensorView, std::less<>>> UnpickleStateDict(std::string_view pickle,
                                                                                 const TorchStorageLoader& load,
                                                                                 std::shared_ptr<const void>* holder);

// Writes `tensors` (contiguous views, any DType above) as a torch.save file
// of a state dict, as PyTorch 1.6+ writes one: a zip of archive/data.pkl
// (pickle protocol 2: a dict of name -> _rebuild_tensor_v2 over a
// persistent-id storage, plain ints, tuples and an empty OrderedDict; no
// other global), archive/data/<i> per tensor, archive/version "3" (which
// torch.load requires) and archive/byteorder "little". torch.load reads it,
// also with weights_only=True, and so does TorchArchive. For the files the
// `adapters` library loads with torch.load (an AdapterHub export).
// INVALID_ARGUMENT for a view whose byte count is not its shape's element
// count times its dtype's size, or a negative dimension.
absl::StatusOr<std::string> WriteTorchStateDict(const std::map<std::string, TensorView, std::less<>>& tensors);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TORCH_ARCHIVE_H_
