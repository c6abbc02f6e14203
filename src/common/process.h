#pragma once

#include <signal.h>

namespace qm {

// Process-wide setup shared by quartermaster and qm-agent; call it first in main, before
// anything can start a thread (threads inherit the signal mask; the real NVML starts threads in
// nvmlInit). It
//  - blocks SIGINT and SIGTERM in the calling thread, so that every later thread inherits the
//    mask and main takes them with sigwait on the returned set (a thread that did not block
//    them would take SIGTERM with its default action: seen on an H200, systemd's stop killed
//    the agent, exit 143, instead of stopping it);
//  - ignores SIGPIPE (a peer that went away is an error on the write, not the end of the
//    process);
//  - turns off abseil's mutex deadlock detection. Debian's abseil records every lock order of
//    every absl::Mutex in a global graph (GraphCycles), and gRPC's core locks absl::Mutex on every
//    call: a few percent of the server's CPU under 5,000 nodes' heartbeats, for a check that
//    aborts the process on an inversion it finds. Our own locks are qm::Mutex, checked at compile
//    time (common/mutex.h).
sigset_t PrepareProcess();

}  // namespace qm
