// Page sizes of the List methods of every store (TaskStore, JobStore,
// DatasetStore), and so of the API's list calls, which page through them.
//
// Thread safety: constants.
#ifndef ADAPTERD_STORAGE_PAGING_H_
#define ADAPTERD_STORAGE_PAGING_H_

namespace adapterd::storage {

// Default and largest page sizes of the List methods of every store.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_PAGING_H_
