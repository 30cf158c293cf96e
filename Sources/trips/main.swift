import Foundation
import TripsCLI

signal(SIGPIPE, SIG_IGN)
exit(TripsCommand.main(Array(CommandLine.arguments.dropFirst()), io: .process()))
