//! How a call that finds no kept connection to its handler opens one
//! without overflowing the handler's accept queue.
//!
//! A connection the kernel has completed sits in the handler's accept
//! queue until the handler accepts it, and Python's `http.server` — the
//! nexilume SDK's handler server — listens with a backlog of 5 and
//! accepts on one thread. Once that queue is full, the handler's kernel
//! drops every further SYN, and a connect then waits out the 1 s SYN
//! retransmission (3 s for the next one). Two rules keep calls from that:
//!
//! - **Pacing.** At most [`PER_HANDLER`] connections to one handler are
//!   open and unanswered at once (an answer proves the handler accepted
//!   the connection). A call waits at most [`WAIT`] for that right: a
//!   handler that takes long to answer must still get every call at once,
//!   so after that wait a call opens its connection unpaced.
//! - **A prompt connect.** An unpaced connect (and any after a refusal)
//!   must complete within [`PROMPT_CONNECT`], or four times what the last
//!   connect to that handler took if that is longer. On a LAN a SYN is
//!   answered in well under a millisecond; one not answered by then was
//!   dropped by a full accept queue, so the call gives that socket up,
//!   waits for the right as paced calls do (at most [`REFUSED_WAIT`], the
//!   kernel's own retransmission time), and tries again. After
//!   [`MAX_REFUSALS`] it connects plainly and leaves retransmission to the
//!   kernel. A handler so far away that the prompt time would reach the
//!   kernel's own is always connected to plainly.
//!
//! Pacing alone rested on a time: on a loaded machine the handler's first
//! answer came later than [`WAIT`], the waiting calls all opened at once,
//! and the SYNs beyond the queue each cost a second. The prompt connect
//! makes that case pay at most [`PROMPT_CONNECT`] instead.
//!
//! [`Opener`] decides the steps (sans-IO); `forward` performs them.

use std::time::Duration;

/// Most connections to one handler that may be open and not yet known to
/// be accepted (no answer on them yet) at once; fits the accept queue of
/// a backlog of 5 with room for another client.
pub const PER_HANDLER: usize = 4;

/// Longest a call waits for the right to open a connection before it
/// opens one unpaced.
pub const WAIT: Duration = Duration::from_millis(20);

/// Longest an unpaced connect may take before its SYN counts as dropped.
/// Far above a LAN's round trip, far below the 1 s a retransmission costs.
pub const PROMPT_CONNECT: Duration = Duration::from_millis(100);

/// Longest a call whose connect was refused waits for the right before it
/// tries again: the time the kernel would have waited to resend its SYN.
pub const REFUSED_WAIT: Duration = Duration::from_secs(1);

/// Prompt connects a call gives up before it connects plainly.
pub const MAX_REFUSALS: u8 = 3;

/// What a call without a kept connection does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Wait at most this long for the right to open a connection (then
    /// look for a kept connection again: one may have come back).
    Wait(Duration),
    /// Connect; with a time, give the connect up (and call
    /// [`Opener::refused`]) if it has not completed by then.
    Connect(Option<Duration>),
}

/// One call's way to a new connection.
#[derive(Debug, Default)]
pub struct Opener {
    refused: u8,
    waited: bool,
}

impl Opener {
    /// The next step, given whether the call holds the right to open and
    /// how long the last connect to this handler took (if one is known).
    pub fn next(&mut self, holds_right: bool, last_connect: Option<Duration>) -> Step {
        if !holds_right && !self.waited {
            self.waited = true;
            return Step::Wait(if self.refused == 0 {
                WAIT
            } else {
                REFUSED_WAIT
            });
        }
        // A paced call's first connect is plain: with a right and no
        // refusal, nothing says the handler is swamped, and a handler
        // that is far or down must get the kernel's full patience.
        let within =
            last_connect.map_or(PROMPT_CONNECT, |t| t.saturating_mul(4).max(PROMPT_CONNECT));
        let prompt = (!holds_right || self.refused > 0)
            && self.refused < MAX_REFUSALS
            && within < REFUSED_WAIT;
        Step::Connect(prompt.then_some(within))
    }

    /// The prompt connect did not complete in time: its SYN was dropped.
    /// The caller gives up its right (if it held one), so the wait that
    /// follows is for an answer on another connection.
    pub fn refused(&mut self) {
        self.refused = self.refused.saturating_add(1);
        self.waited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_call_connects_plainly() {
        let mut o = Opener::default();
        assert_eq!(o.next(false, None), Step::Wait(WAIT));
        assert_eq!(o.next(true, None), Step::Connect(None));
    }

    #[test]
    fn an_unpaced_call_connects_promptly_and_after_a_refusal_waits_for_the_right() {
        let mut o = Opener::default();
        assert_eq!(o.next(false, None), Step::Wait(WAIT));
        assert_eq!(o.next(false, None), Step::Connect(Some(PROMPT_CONNECT)));
        o.refused();
        assert_eq!(o.next(false, None), Step::Wait(REFUSED_WAIT));
        // With the right now, still prompt: the queue was full moments ago.
        assert_eq!(o.next(true, None), Step::Connect(Some(PROMPT_CONNECT)));
    }

    #[test]
    fn a_far_handler_gets_four_of_its_connect_times_or_a_plain_connect() {
        let mut o = Opener::default();
        let far = Some(Duration::from_millis(150));
        assert_eq!(o.next(false, far), Step::Wait(WAIT));
        assert_eq!(
            o.next(false, far),
            Step::Connect(Some(Duration::from_millis(600)))
        );
        // A near one: never less than PROMPT_CONNECT.
        let near = Some(Duration::from_micros(80));
        assert_eq!(o.next(false, near), Step::Connect(Some(PROMPT_CONNECT)));
        // Four connect times at or past the kernel's retransmission: plain.
        let farther = Some(Duration::from_millis(250));
        assert_eq!(o.next(false, farther), Step::Connect(None));
    }

    #[test]
    fn after_the_last_refusal_the_kernel_retransmits() {
        // A handler whose queue stays full: no right ever comes.
        let mut o = Opener::default();
        let mut steps = Vec::new();
        loop {
            let step = o.next(false, None);
            steps.push(step);
            match step {
                Step::Wait(_) => {}
                Step::Connect(Some(_)) => o.refused(),
                Step::Connect(None) => break,
            }
            assert!(steps.len() < 32, "no end: {steps:?}");
        }
        let prompt = Step::Connect(Some(PROMPT_CONNECT));
        let again = Step::Wait(REFUSED_WAIT);
        assert_eq!(
            steps,
            [
                Step::Wait(WAIT),
                prompt,
                again,
                prompt,
                again,
                prompt,
                again,
                Step::Connect(None)
            ]
        );
        assert_eq!(o.next(true, None), Step::Connect(None));
    }
}
