// CRC-32C (Castagnoli), the checksum that checkpoints record of each tensor's bytes and the run
// state of each data file it read: one flipped bit anywhere changes it. The polynomial of iSCSI,
// ext4 and Btrfs; crc32c("123456789") = 0xE3069283.
//
//   uint32_t c = autograd::io::crc32c(bytes.data(), bytes.size());
//   uint32_t same = autograd::io::crc32c(second_half, n2, autograd::io::crc32c(first_half, n1));   // in pieces
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace autograd::io {

// The checksum of n bytes, continuing `crc` (the checksum of the bytes before them; 0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// "e3069283": eight lowercase hex digits, as the files write it.
std::string crc32c_hex(uint32_t crc);

}  // namespace autograd::io
