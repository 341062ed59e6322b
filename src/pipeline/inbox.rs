//! The delivery loops' end of the source channel, received in bulk.
//!
//! Receiving one event at a time from a full channel wakes the source task for every slot
//! freed, and the two tasks ping-pong between the cores. [`Inbox`] takes up to
//! [`Inbox::BULK`] events per wake-up (`recv_many`), which also frees their slots at once, and
//! hands them out one by one.

use tokio::sync::{mpsc, watch};

/// A bounded channel's receiver that takes what is queued in one go.
pub struct Inbox<T> {
    rx: mpsc::Receiver<T>,
    /// Received and not yet handed out, in reverse order (the next one is last).
    taken: Vec<T>,
    /// While it holds true, nothing is handed out ([`Inbox::paused_by`]).
    paused: Option<watch::Receiver<bool>>,
}

impl<T> Inbox<T> {
    /// Most items taken from the channel per wake-up.
    pub const BULK: usize = 256;

    /// Wraps the receiving end of a channel.
    pub fn new(rx: mpsc::Receiver<T>) -> Self {
        Self {
            rx,
            taken: Vec::with_capacity(Self::BULK),
            paused: None,
        }
    }

    /// Hands nothing out while `paused` holds true (a connector paused through the REST API,
    /// as Kafka Connect's `PUT /connectors/{name}/pause`): the source, its channel full, stops
    /// reading but keeps its connection, and no checkpoint moves past what was handed out.
    pub fn paused_by(mut self, paused: watch::Receiver<bool>) -> Self {
        self.paused = Some(paused);
        self
    }

    /// The next item, in channel order; `None` once the channel is closed and empty.
    ///
    /// Cancel safe (usable in `tokio::select!`): an item is handed out only when this returns.
    pub async fn recv(&mut self) -> Option<T> {
        if let Some(paused) = &mut self.paused {
            // A dropped sender is no pause: the connector's handle is gone with it.
            let _ = paused.wait_for(|p| !*p).await;
        }
        if self.taken.is_empty() {
            if self.rx.recv_many(&mut self.taken, Self::BULK).await == 0 {
                return None;
            }
            self.taken.reverse();
        }
        self.taken.pop()
    }

    /// Items received from the channel but not handed out yet, plus those still queued.
    pub fn len(&self) -> usize {
        self.taken.len() + self.rx.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes the channel: senders fail from now on; what was sent can still be received.
    pub fn close(&mut self) {
        self.rx.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hands_out_in_order_across_bulks_then_ends() {
        let (tx, rx) = mpsc::channel(4);
        let mut inbox = Inbox::new(rx);
        let producer = tokio::spawn(async move {
            for i in 0..1000u32 {
                tx.send(i).await.unwrap();
            }
        });
        let mut got = Vec::new();
        while let Some(i) = inbox.recv().await {
            got.push(i);
        }
        producer.await.unwrap();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn close_keeps_what_was_sent() {
        let (tx, rx) = mpsc::channel(8);
        let mut inbox = Inbox::new(rx);
        for i in 0..3u8 {
            tx.send(i).await.unwrap();
        }
        assert_eq!(inbox.recv().await, Some(0));
        inbox.close();
        assert!(tx.send(9).await.is_err());
        assert_eq!(inbox.len(), 2);
        assert_eq!(inbox.recv().await, Some(1));
        assert_eq!(inbox.recv().await, Some(2));
        assert_eq!(inbox.recv().await, None);
    }

    #[tokio::test]
    async fn nothing_is_handed_out_while_paused() {
        let (tx, rx) = mpsc::channel(4);
        let (pause, paused) = watch::channel(true);
        let mut inbox = Inbox::new(rx).paused_by(paused);
        tx.send(1).await.unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), inbox.recv()).await;
        assert!(waited.is_err(), "paused: nothing handed out");
        pause.send_replace(false);
        assert_eq!(inbox.recv().await, Some(1));
        pause.send_replace(true);
        tx.send(2).await.unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), inbox.recv()).await;
        assert!(waited.is_err(), "paused again");
        drop(pause);
        assert_eq!(
            inbox.recv().await,
            Some(2),
            "a dropped pause handle is no pause"
        );
    }
}
