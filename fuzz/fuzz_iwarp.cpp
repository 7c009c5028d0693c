// Placeholder: the iwarp parsers are not written yet. Replace with a target that
// feeds the input to every iwarp parser (and re-encodes what parses).
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}
