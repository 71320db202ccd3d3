// The `adapterd restore` and `adapterd backups` commands (offline: no server
// runs them). docs/DEPLOYMENT.md, "Backup and restore".
//
//   adapterd backups list   --backup_dir DIR
//   adapterd backups verify --backup_dir DIR [--backup_id N]
//   adapterd backups delete --backup_dir DIR --backup_id N
//   adapterd restore        --backup_dir DIR --data_dir DIR [--backup_id N]
//
// list and verify exit 1, naming every damaged file, when the directory is
// damaged (storage/backup.h); verify without --backup_id checks every backup.
// restore writes backup N (default: the newest, refused while the
// directory's metadata is damaged) into <data_dir>/db, which must not hold a
// database yet, then opens it once to check it (schema, tasks and jobs
// readable) and prints what it restored. --backup_dir must lie outside
// --data_dir.
#ifndef ADAPTERD_SERVER_BACKUP_TOOL_H_
#define ADAPTERD_SERVER_BACKUP_TOOL_H_

#include <string_view>

namespace adapterd {

// True when argv[1] names one of the commands above.
bool IsBackupCommand(int argc, char** argv);
// Runs it; returns the process exit code (0 ok, 1 failed, 2 bad usage).
int RunBackupCommand(int argc, char** argv);

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_BACKUP_TOOL_H_
