// Atomic checkpoints of the training runner: a JSON meta record and named byte blobs (host
// memory) in DIR/checkpoint/, so that a run killed at any moment leaves a complete
// checkpoint, either the previous one or the new one.
//
//   DIR/checkpoint/manifest.json   {"format": "lcm-exec-checkpoint/1", "checksum": "lcm-mx64",
//                                   "meta": {...}, "blobs": [{"name", "file", "bytes", "checksum"}]}
//   DIR/checkpoint/<name>.bin      one file per blob
//
// save: write everything to DIR/checkpoint.tmp-<pid>/ (each file and the directory fsynced),
// rename DIR/checkpoint/ to DIR/checkpoint.old/, rename the tmp directory to DIR/checkpoint/,
// fsync DIR, remove DIR/checkpoint.old/. Recovery rule (load and the next save apply it):
// DIR/checkpoint/ when it exists (complete by construction: only a finished tmp directory is
// renamed to it); otherwise DIR/checkpoint.old/ (the save was killed between its two
// renames); checkpoint.tmp-* directories are never read. Before writing, save removes stale
// tmp directories, removes checkpoint.old/ when checkpoint/ exists and renames it back when
// checkpoint/ does not. One writer per DIR at a time.
//
// The checksum (lcm-mx64, checkpoint.cpp) detects corruption and truncation; it is not a
// cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lcm::exec::train {

struct CheckpointBlob {
  std::string name;  // [A-Za-z0-9._-]+, unique within a checkpoint; stored as <name>.bin
  const void* data;  // host memory
  size_t bytes;
};

// ExecError on an I/O failure (naming the file) or a bad blob name.
void save_checkpoint(const std::filesystem::path& dir, const nlohmann::json& meta,
                     const std::vector<CheckpointBlob>& blobs);

struct LoadedCheckpoint {
  nlohmann::json meta;
  std::map<std::string, std::vector<std::byte>> blobs;
};

// nullopt: no checkpoint in DIR. A corrupt or truncated blob, a missing file or a bad
// manifest is an ExecError naming the file and what is wrong.
std::optional<LoadedCheckpoint> load_checkpoint(const std::filesystem::path& dir);

// lcm-mx64: 64-bit multiply-rotate over the data's 8-byte little-endian words (the last one
// zero-padded), seeded with the byte count. A change confined to one word always changes it.
uint64_t checkpoint_checksum(const void* data, size_t bytes);

}  // namespace lcm::exec::train
