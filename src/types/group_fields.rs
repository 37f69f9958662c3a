//! The group multi-lock's field names (sync protocol §6.1): HighwayHash-128 of a value's bytes
//! with Redisson's fixed key, written big-endian, in standard Base64 without the trailing `==`.
//!
//! HighwayHash is Google's keyed hash (state of four 64-bit lanes per vector, 32-byte packets,
//! multiply-and-zipper mixing); written here from its published description.

/// Redisson's key for the group lock's value hashes.
const KEY: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xf39c_c060_5ced_c834,
    0x1082_276b_f3a2_7251,
    0xf86c_6a11_d0c1_8e95,
];

/// The initial multipliers of HighwayHash (digits of pi, as published).
const INIT0: [u64; 4] = [
    0xdbe6_d5d5_fe4c_ce2f,
    0xa409_3822_299f_31d0,
    0x1319_8a2e_0370_7344,
    0x243f_6a88_85a3_08d3,
];
const INIT1: [u64; 4] = [
    0x3bd3_9e10_cb0e_f593,
    0xc0ac_f169_b5f1_8a8c,
    0xbe54_66cf_34e9_0c6c,
    0x4528_21e6_38d0_1377,
];

struct State {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

/// Spreads the bytes of `v1`/`v0` over two sums (HighwayHash's "zipper merge").
fn zipper_merge_and_add(v1: u64, v0: u64, add1: &mut u64, add0: &mut u64) {
    let a0 = (((v0 & 0xff00_0000) | (v1 & 0x00ff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0x00ff_0000_0000_0000)) >> 16)
        | (v0 & 0x00ff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56);
    let a1 = (((v1 & 0xff00_0000) | (v0 & 0x00ff_0000_0000)) >> 24)
        | (v1 & 0x00ff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0x00ff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000);
    *add0 = add0.wrapping_add(a0);
    *add1 = add1.wrapping_add(a1);
}

impl State {
    fn new(key: &[u64; 4]) -> Self {
        let mut s = State {
            v0: [0; 4],
            v1: [0; 4],
            mul0: INIT0,
            mul1: INIT1,
        };
        for i in 0..4 {
            s.v0[i] = INIT0[i] ^ key[i];
            s.v1[i] = INIT1[i] ^ key[i].rotate_left(32);
        }
        s
    }

    fn update(&mut self, lanes: [u64; 4]) {
        for (i, lane) in lanes.into_iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(lane));
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let (v0, v1) = (&mut self.v0, &mut self.v1);
        let (a, b) = v0.split_at_mut(1);
        zipper_merge_and_add(v1[1], v1[0], &mut b[0], &mut a[0]);
        let (a, b) = v0.split_at_mut(3);
        zipper_merge_and_add(v1[3], v1[2], &mut b[0], &mut a[2]);
        let (a, b) = v1.split_at_mut(1);
        zipper_merge_and_add(v0[1], v0[0], &mut b[0], &mut a[0]);
        let (a, b) = v1.split_at_mut(3);
        zipper_merge_and_add(v0[3], v0[2], &mut b[0], &mut a[2]);
    }

    fn update_packet(&mut self, packet: &[u8]) {
        let mut lanes = [0u64; 4];
        for (lane, bytes) in lanes.iter_mut().zip(packet.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            *lane = u64::from_le_bytes(b);
        }
        self.update(lanes);
    }

    /// The last `0 < len < 32` bytes.
    fn update_remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let size_mod4 = size & 3;
        let whole = size & !3;
        let n = size as u64;
        for i in 0..4 {
            self.v0[i] = self.v0[i].wrapping_add((n << 32).wrapping_add(n));
            // Each 32-bit half rotated left by `size`.
            let lo = (self.v1[i] as u32).rotate_left(size as u32);
            let hi = ((self.v1[i] >> 32) as u32).rotate_left(size as u32);
            self.v1[i] = u64::from(lo) | (u64::from(hi) << 32);
        }
        let mut packet = [0u8; 32];
        packet[..whole].copy_from_slice(&bytes[..whole]);
        let rest = &bytes[whole..];
        if size & 16 != 0 {
            // The last four bytes of the input.
            packet[28..32].copy_from_slice(&bytes[size - 4..]);
        } else if size_mod4 != 0 {
            packet[16] = rest[0];
            packet[17] = rest[size_mod4 >> 1];
            packet[18] = rest[size_mod4 - 1];
        }
        self.update_packet(&packet);
    }

    fn permute_and_update(&mut self) {
        let v = self.v0;
        self.update([
            v[2].rotate_left(32),
            v[3].rotate_left(32),
            v[0].rotate_left(32),
            v[1].rotate_left(32),
        ]);
    }

    fn finish128(mut self) -> [u64; 2] {
        for _ in 0..6 {
            self.permute_and_update();
        }
        [
            self.v0[0]
                .wrapping_add(self.mul0[0])
                .wrapping_add(self.v1[2])
                .wrapping_add(self.mul1[2]),
            self.v0[1]
                .wrapping_add(self.mul0[1])
                .wrapping_add(self.v1[3])
                .wrapping_add(self.mul1[3]),
        ]
    }
}

/// HighwayHash-128 of `data` with `key`.
fn highway128(key: &[u64; 4], data: &[u8]) -> [u64; 2] {
    let mut state = State::new(key);
    let mut packets = data.chunks_exact(32);
    for packet in &mut packets {
        state.update_packet(packet);
    }
    let rest = packets.remainder();
    if !rest.is_empty() {
        state.update_remainder(rest);
    }
    state.finish128()
}

/// Standard Base64 (`A–Z a–z 0–9 + /`) with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The group-lock field name of a value (its bytes as the codec writes them; UTF-8 for a
/// string): Base64 of the 16-byte HighwayHash-128, words big-endian, without the `==`.
pub(crate) fn group_field(value: &[u8]) -> String {
    let [a, b] = highway128(&KEY, value);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    let mut text = base64(&bytes);
    text.truncate(22);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_test_vectors() {
        assert_eq!(
            highway128(&KEY, b"a"),
            [0xab0b_c04b_5da9_4740, 0xa046_2b5a_ca91_2353]
        );
        assert_eq!(group_field(b"a"), "qwvAS12pR0CgRitaypEjUw");
        assert_eq!(group_field(b"b"), "Q5CdP+xmkHdTGWYr64Lw6A");
        assert_eq!(group_field(b"c"), "b/ERpQOx2r8GXiGBU6d0Hg");
        assert_eq!(group_field(b""), "t6rZwibGo2uy1OSmNVe8pg");
        assert_eq!(group_field(b"order:42"), "qCj9C1XTG9WEby0hj4f/Cw");
    }

    #[test]
    fn every_length_hashes_without_panicking_and_differs() {
        let data: Vec<u8> = (0u8..=100).collect();
        let mut seen = std::collections::HashSet::new();
        for len in 0..=data.len() {
            let f = group_field(&data[..len]);
            assert_eq!(f.len(), 22);
            assert!(seen.insert(f), "length {len} collides");
        }
    }

    #[test]
    fn base64_pads_like_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
