// pcap_to_corpus FILE.pcap DIR: write each frame of FILE.pcap to DIR as one
// file (named after the capture and frame number): the fuzzers' seeds.
#include <cstdio>
#include <fstream>
#include <string>

#include "wire/pcap/pcap_file.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FILE.pcap DIR\n", argv[0]);
    return 2;
  }
  std::string error;
  const std::string path = argv[1];
  auto reader = urnic::pcap::Reader::open(path, &error);
  if (!reader) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const std::string base = path.substr(path.find_last_of('/') + 1);
  int n = 0;
  while (auto frame = reader->next()) {
    std::ofstream out(std::string(argv[2]) + "/" + base + "-" + std::to_string(++n), std::ios::binary);
    out.write(reinterpret_cast<const char*>(frame->data.data()), static_cast<std::streamsize>(frame->data.size()));
  }
  return 0;
}
