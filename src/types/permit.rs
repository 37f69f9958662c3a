//! Permit ids of the permit-expirable semaphore (sync protocol §3.1): 16 random bytes, stored
//! raw in Redis and shown as 32 lowercase hexadecimal characters, as Redisson shows them.

use std::{fmt, str::FromStr};

use parking_lot::Mutex;

/// The id of one permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore):
/// 16 random bytes. Its text form ([`Display`](fmt::Display), [`FromStr`]) is 32 lowercase
/// hexadecimal characters, the form Redisson's `acquire()` returns, so an id printed by a Java
/// service can be parsed here and released, and the other way round.
///
/// ```
/// use redisson_lock::PermitId;
/// let id: PermitId = "00112233445566778899aabbccddeeff".parse().unwrap();
/// assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
/// assert_eq!(id.as_bytes()[15], 0xff);
/// assert!("xyz".parse::<PermitId>().is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitId([u8; 16]);

impl PermitId {
    /// The id made of these bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The 16 bytes stored in Redis (the sorted set's member).
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// A fresh random id.
    pub(crate) fn random() -> Self {
        let (a, b) = {
            let mut rng = RNG.lock();
            let rng = rng.get_or_insert_with(Xoshiro::seeded);
            (rng.next(), rng.next())
        };
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&a.to_be_bytes());
        bytes[8..].copy_from_slice(&b.to_be_bytes());
        Self(bytes)
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PermitId({self})")
    }
}

/// A permit id that is not 32 hexadecimal characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePermitIdError;

impl fmt::Display for ParsePermitIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a permit id is 32 hexadecimal characters")
    }
}

impl std::error::Error for ParsePermitIdError {}

impl FromStr for PermitId {
    type Err = ParsePermitIdError;

    /// Parses 32 hexadecimal characters (either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.as_bytes();
        if text.len() != 32 {
            return Err(ParsePermitIdError);
        }
        let digit = |c: u8| (c as char).to_digit(16).ok_or(ParsePermitIdError);
        let mut bytes = [0u8; 16];
        for (i, pair) in text.chunks_exact(2).enumerate() {
            bytes[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(Self(bytes))
    }
}

/// The process's id generator, seeded once from the system's randomness.
static RNG: Mutex<Option<Xoshiro>> = Mutex::new(None);

/// xoshiro256++ (Blackman and Vigna), the generator Redisson draws permit ids from.
struct Xoshiro([u64; 4]);

impl Xoshiro {
    /// Seeded from two v4 UUIDs (the operating system's randomness); never all zero.
    fn seeded() -> Self {
        let a = uuid::Uuid::new_v4().as_u64_pair();
        let b = uuid::Uuid::new_v4().as_u64_pair();
        let mut state = [a.0, a.1, b.0, b.1];
        if state == [0; 4] {
            state[0] = 1;
        }
        Self(state)
    }

    fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_rejects_bad_input() {
        let id = PermitId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert!(text
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_eq!(text.parse::<PermitId>(), Ok(id));
        assert_eq!(text.to_uppercase().parse::<PermitId>(), Ok(id));
        for bad in ["", "00", &"0".repeat(33), &"g".repeat(32), &"é".repeat(16)] {
            assert_eq!(bad.parse::<PermitId>(), Err(ParsePermitIdError), "{bad}");
        }
    }

    #[test]
    fn ids_do_not_repeat() {
        let ids: std::collections::HashSet<PermitId> =
            (0..10_000).map(|_| PermitId::random()).collect();
        assert_eq!(ids.len(), 10_000);
    }

    #[test]
    fn the_generator_is_xoshiro256_plus_plus() {
        // Reference output of xoshiro256++ for the state {1, 2, 3, 4}.
        let mut rng = Xoshiro([1, 2, 3, 4]);
        assert_eq!(rng.next(), 41_943_041);
        assert_eq!(rng.next(), 58_720_359);
        assert_eq!(rng.next(), 3_588_806_011_781_223);
    }
}
