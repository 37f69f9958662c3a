//! One file per lock kind: its protocol (a [`Protocol`](crate::lock::protocol::Protocol)
//! implementation), its marker type and aliases, its kind-specific methods and its
//! `Client::get_*` factory. `fenced.rs` is the model file for a new kind. The spin lock's
//! back-off schedules sit beside it (`backoff`).
//!
//! Two small macros, declared here for every kind file: [`kind!`] declares a kind (its marker
//! type and the aliases of its handle and guard), [`pass_on!`] writes the calls a protocol that
//! wraps another kind's passes on unchanged.

/// Declares a lock kind: its marker type (an uninhabited, sealed [`Kind`](crate::Kind) named
/// `$name` in logs and `Debug` output), the alias of its handle (`Lock<Marker>`) and the alias
/// of its guard (`Guard<Marker>`), each with the doc comments given.
macro_rules! kind {
    (
        $(#[$kind_doc:meta])* $marker:ident = $name:literal;
        $(#[$lock_doc:meta])* type $lock:ident;
        $(#[$guard_doc:meta])* type $guard:ident;
    ) => {
        $(#[$kind_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $marker {}

        impl $crate::lock::protocol::sealed::Sealed for $marker {}
        impl $crate::lock::protocol::Kind for $marker {
            const NAME: &'static str = $name;
        }

        $(#[$lock_doc])*
        pub type $lock = $crate::lock::front::Lock<$marker>;

        $(#[$guard_doc])*
        pub type $guard = $crate::lock::guard::Guard<$marker>;
    };
}

/// Inside `impl Protocol for P`, where `P` wraps another kind's protocol in its field `base`:
/// the calls it passes on unchanged, by name (`pass_on!(name, release, renewal)`).
macro_rules! pass_on {
    ($($call:ident),+ $(,)?) => {
        $(pass_on!(@ $call);)+
    };
    (@ name) => {
        fn name(&self) -> &str {
            $crate::lock::protocol::Protocol::name(&self.base)
        }
        fn shared_name(&self) -> std::sync::Arc<str> {
            $crate::lock::protocol::Protocol::shared_name(&self.base)
        }
    };
    (@ sleep) => {
        fn sleep(&self) -> $crate::lock::protocol::SleepRule {
            self.base.sleep()
        }
    };
    (@ wait_line) => {
        fn wait_line(&self) -> Option<$crate::types::line::WaitLine> {
            self.base.wait_line()
        }
    };
    (@ release) => {
        fn release(
            &self,
            req: $crate::lock::protocol::ReleaseRequest<'_>,
        ) -> $crate::conn::scripts::ScriptCall {
            self.base.release(req)
        }
    };
    (@ give_up) => {
        fn give_up(&self, field: &str, queue_ms: u64) -> Option<$crate::conn::scripts::ScriptCall> {
            self.base.give_up(field, queue_ms)
        }
    };
    (@ renewal) => {
        fn renewal(&self) -> $crate::service::watchdog::RenewalShape {
            self.base.renewal()
        }
        fn renewal_values(&self) -> std::sync::Arc<[String]> {
            self.base.renewal_values()
        }
    };
    (@ force_unlock) => {
        fn force_unlock(&self, publish: &str) -> $crate::conn::scripts::ScriptCall {
            self.base.force_unlock(publish)
        }
    };
}

pub(crate) mod backoff;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod group;
pub(crate) mod non_reentrant;
pub(crate) mod non_reentrant_fair;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod spin;
