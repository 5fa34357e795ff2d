#include "autograd/io/crc32c.h"

#include <array>
#include <cstdio>

namespace autograd::io {

// The reflected polynomial 0x82F63B78, one byte at a time through a 256-entry table: entry i is
// the remainder of byte i shifted through eight steps of the bitwise division.
static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
    return t;
}();

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    crc = ~crc;   // the register starts all ones, and the result is inverted (so 0 continues nothing)
    for (size_t i = 0; i < n; i++) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

std::string crc32c_hex(uint32_t crc) {
    char text[9];
    std::snprintf(text, sizeof text, "%08x", crc);
    return text;
}

}  // namespace autograd::io
