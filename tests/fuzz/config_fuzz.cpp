// The config reader: YAML text and tandem-train's --set overrides, through validation. The input is
// the YAML, then each override after a NUL byte. What reads must survive to_yaml and read back as
// the same config (config.h: parse_config(to_yaml(c)) == c).
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "trainer/config/config.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  std::vector<std::string> out;
  for (const char* name : {"tiny.yaml", "base.yaml", "big.yaml"}) {
    std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/configs/" + name, std::ios::binary);
    if (!in) fail(std::string("no configs/") + name + " under " + TANDEM_SOURCE_DIR);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  out.push_back(out.front() + std::string(1, '\0') + "train.lr=1e-3" + std::string(1, '\0') +
                "model.activation=swish" + std::string(1, '\0') + "data.max_tokens=auto");
  return out;
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t yaml_end = input.find('\0');
  const std::string yaml = input.substr(0, yaml_end);
  std::vector<std::string> overrides;
  for (size_t begin = yaml_end; begin != std::string::npos && begin < input.size();) {
    const size_t end = input.find('\0', begin + 1);
    overrides.push_back(input.substr(begin + 1, end == std::string::npos ? end : end - begin - 1));
    begin = end;
  }
  std::optional<config::Config> config;
  fuzz::refused_or_read([&] { config = config::parse_config(yaml, "fuzz.yaml", overrides); });
  if (!config) return 0;
  // Whatever was accepted must read back: an exception here is a finding, not a refusal.
  const std::string emitted = config::to_yaml(*config);
  std::string again;
  try {
    again = config::to_yaml(config::parse_config(emitted, "to_yaml"));
  } catch (const std::exception& e) {
    fuzz::fail(std::string("to_yaml's text does not read: ") + e.what() + "\n" + emitted);
  }
  if (again != emitted)
    fuzz::fail("to_yaml does not read back the same:\n" + emitted + "---\n" + again);
  return 0;
}
