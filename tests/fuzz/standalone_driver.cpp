// Runs a fuzz target over files instead of under libFuzzer, so that every
// corpus input (each seed, and each input that once found a bug) is a plain
// test in every build, with no clang: `fuzz_X DIR_OR_FILE...`. As libgit2's
// fuzzers/standalone_driver.c does; exit 0 when every input ran.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run_one(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path = argv[i];
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(path))
        if (entry.is_regular_file()) run_one(entry.path()), ++inputs;
    } else {
      run_one(path), ++inputs;
    }
  }
  std::cout << inputs << " inputs ran\n";
  return inputs > 0 ? 0 : 1;
}
