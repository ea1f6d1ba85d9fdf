//! CRC-32C (Castagnoli), as the v3 `crc32c` codec appends it: reflected,
//! polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF.

const POLY: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// The CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        // RFC 3720, B.4: 32 bytes of zeros, and the standard check string.
        assert_eq!(super::crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(super::crc32c(b"123456789"), 0xE306_9283);
    }
}
