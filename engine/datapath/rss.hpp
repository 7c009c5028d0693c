// Receive side scaling (issue 49): the Toeplitz hash of the Microsoft RSS
// specification ("Verifying the RSS Hash Calculation"), over the fields an
// RSS QP names (ibv_rx_hash_conf: IPv4 or IPv6 source / destination
// addresses, TCP or UDP source / destination ports), and the check of an
// RSS QP's hash configuration as mlx5 makes it.
//
// The hash input is the selected fields in the specification's order:
// source address, destination address, source port, destination port,
// each in network byte order. A frame that does not carry the selected
// L3 (an IPv6 frame for IPv4 fields, a non-IP frame) hashes to 0, and so
// does one without the selected L4 (UDP ports of a TCP frame): the first
// WQ of the table, as a NIC sends traffic its hash does not cover to one
// queue.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/datapath/flow_match.hpp"

namespace urnic::engine {

// The Toeplitz hash of `input` under `key`: for each set bit i of the
// input (most significant bit of byte 0 first), the 32 key bits starting
// at bit i, XORed together. Key bits past the end of `key` count as 0.
std::uint32_t toeplitz_hash(std::span<const std::uint8_t> key, std::span<const std::uint8_t> input) noexcept;

// What an RSS QP hashes with and spreads over.
struct RssConf {
  std::vector<std::uint8_t> key;  // the Toeplitz key
  std::uint64_t fields = 0;       // IBV_RX_HASH_* bits
  std::vector<std::uint32_t> wqns;  // the indirection table: 2^n WQ numbers
};

// The fields of the frame `k` the mask selects, in hash order, into `out`
// (cleared first); false (and nothing) when the frame lacks them.
bool rss_input(std::uint64_t fields, const FrameKey& k, std::vector<std::uint8_t>& out);
// The frame's hash under `c`: 0 when it lacks the selected fields.
std::uint32_t rss_hash(const RssConf& c, const FrameKey& k, std::vector<std::uint8_t>& scratch);
// The WQ number the table picks for the frame (hash mod table size).
std::uint32_t rss_pick(const RssConf& c, const FrameKey& k, std::vector<std::uint8_t>& scratch);

// The check of ibv_create_qp_ex's ibv_rx_hash_conf, as mlx5_ib's
// create_rss_raw_qp_tir: a function other than Toeplitz, or a field urnic
// does not hash (inner headers, IPsec SPI): EOPNOTSUPP; a key of another
// length than 40 bytes, IPv4 and IPv6 fields together, or TCP and UDP
// ports together: EINVAL. 0 when it can be hashed.
int check_rx_hash(std::uint32_t function, std::uint32_t key_len, std::uint64_t fields) noexcept;

}  // namespace urnic::engine
