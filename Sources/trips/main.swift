import Foundation
import TripsCLI

signal(SIGPIPE, SIG_IGN)
let status = TripsCommand.main(Array(CommandLine.arguments.dropFirst()), io: .process())
// Threads of a stopped watcher or server (a store monitor, a stream's reader) may still be
// running: `exit` would run PROJ's C++ static destructors under them, which crashes now and
// then. The output is flushed, and the process ends without them.
fflush(nil)
_exit(status)
