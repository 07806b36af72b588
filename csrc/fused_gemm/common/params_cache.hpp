// A per-thread, set-associative cache from a launch's problem bytes to its prepared kernel Params.
//
// A decode step launches the same few dozen (weight, buffer) combinations over and over; a hit
// skips CUTLASS's argument checks and the TMA descriptor encoding.  Sized for a whole step's
// working set per library (Sets x Ways entries), allocated on a thread's first launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace fused_gemm {

template <class Problem, size_t KeyBytes, class Value, int Sets = 16, int Ways = 8>
class ParamsCache {
  static_assert(KeyBytes % sizeof(uint64_t) == 0, "the key is hashed in 8-byte words");
  static_assert((Sets & (Sets - 1)) == 0, "Sets is a power of two");

 public:
  struct Entry {
    uint64_t hash = 0;
    bool valid = false;
    Problem key;
    Value value;
  };

  // The entry holding `p` (valid) or the slot to fill for it (invalid, to be claimed with store()).
  Entry *find(Problem const &p) {
    uint64_t const h = hash(p);
    Entry *set = &entries_[(h & (Sets - 1)) * Ways];
    for (int w = 0; w < Ways; ++w) {
      Entry &e = set[w];
      if (e.valid && e.hash == h && std::memcmp(&e.key, &p, KeyBytes) == 0) return &e;
    }
    int &victim = next_victim_[h & (Sets - 1)];
    Entry *slot = &set[victim];
    victim = (victim + 1) % Ways;
    slot->valid = false;
    slot->hash = h;
    return slot;
  }

  static void store_key(Entry *e, Problem const &p) {
    std::memcpy(&e->key, &p, KeyBytes);
    e->valid = true;
  }

  static ParamsCache &for_this_thread() {
    static thread_local std::unique_ptr<ParamsCache> cache;
    if (!cache) cache.reset(new ParamsCache());
    return *cache;
  }

 private:
  static uint64_t hash(Problem const &p) {
    uint64_t words[KeyBytes / sizeof(uint64_t)];
    std::memcpy(words, &p, KeyBytes);
    uint64_t h = 1469598103934665603ull;
    for (uint64_t w : words) h = (h ^ w) * 1099511628211ull;
    // fmix64 (MurmurHash3's finaliser): pointers differ in high bits, the set index takes low ones.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
  }

  Entry entries_[Sets * Ways];
  int next_victim_[Sets] = {};
};

}  // namespace fused_gemm
