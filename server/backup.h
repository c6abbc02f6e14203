#pragma once

#include <string>
#include <vector>

namespace qm {

// `quartermaster backup --data-dir DIR --output FILE`: a consistent pg_dump (custom format,
// 0600) of the embedded cluster of DIR, taken while the server runs (or with the cluster
// started for the dump and stopped again when no server runs it).
int BackupMain(const std::vector<std::string>& args);

// `quartermaster restore --data-dir NEW --input FILE [--bump-revision N]`: a new embedded
// cluster for the data directory NEW (which must not have one yet) holding the backup. Then,
// as etcdutl's --bump-revision and --mark-compacted do for a Kubernetes restore, the revision
// sequence jumps N (1,000,000,000) past the backup and everything up to there counts as
// compacted: new writes get revisions above any the old server can have handed out after the
// backup, and a watch resuming at a revision from before the restore gets 410 Gone and lists
// again instead of silently missing changes. docs/reliability.md has the procedure.
int RestoreMain(const std::vector<std::string>& args);

}  // namespace qm
