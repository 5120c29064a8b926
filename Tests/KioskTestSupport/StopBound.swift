/// How long a test lets a pause, a cancel or Ctrl-C take to stop a running transfer.
///
/// On an idle machine a stop takes a few tenths of a second: the queue looks for pauses and
/// cancels four times a second, curl's loop wakes ten times a second, and the stop is one write.
/// A CI machine busy with other work was seen to take 2.1 s for the same thing, so the bound is
/// loose; what it catches is a stop that waited for something: the transfer's end, a lock, a hang.
public let stopBound: Duration = .seconds(3)
