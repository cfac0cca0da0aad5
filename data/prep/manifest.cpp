// read_corpora_manifest: the YAML of manifest.h, checked key by key.
#include "data/prep/manifest.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "trainer/common/error.h"

namespace tandem::data {
namespace {

// The manifest's messages: "corpora.yaml:4:7: corpus 'en-es': ...".
class Reader {
 public:
  explicit Reader(std::string path)
      : path_(std::move(path)), folder_(std::filesystem::path(path_).parent_path()) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    const YAML::Mark mark = at.Mark();
    std::string where = path_;
    if (mark.line >= 0) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    throw std::invalid_argument(where + ": " + what);
  }

  // A scalar's text.
  std::string text(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) fail(node, what + ": expected a single value");
    return node.Scalar();
  }

  // One path or a list of them, relative ones made relative to the manifest's folder.
  std::vector<std::string> files(const YAML::Node& node, const std::string& what) const {
    std::vector<std::string> paths;
    if (node.IsScalar()) {
      paths.push_back(resolve(node.Scalar()));
    } else if (node.IsSequence() && node.size() > 0) {
      for (const YAML::Node& item : node) paths.push_back(resolve(text(item, what)));
    } else {
      fail(node, what + ": expected a file or a list of files");
    }
    return paths;
  }

  SplitFiles split(const YAML::Node& node, const std::string& name, const std::string& what) const {
    if (!node.IsMap()) fail(node, what + ": expected {src: FILES, tgt: FILES}");
    SplitFiles files;
    files.name = name;
    for (const auto& entry : node) {
      const std::string key = text(entry.first, what);
      if (key == "src") {
        files.src = this->files(entry.second, what + ".src");
      } else if (key == "tgt") {
        files.tgt = this->files(entry.second, what + ".tgt");
      } else if (key == "align") {
        files.align = this->files(entry.second, what + ".align");
      } else {
        fail(entry.first, what + ": unknown key '" + key + "' (expected src, tgt and align)");
      }
    }
    if (files.src.empty() || files.tgt.empty()) {
      fail(node, what + ": needs both src and tgt");
    }
    return files;
  }

  CorpusFiles corpus(const YAML::Node& node, size_t index) const {
    const std::string where = "corpus " + std::to_string(index + 1);
    if (!node.IsMap()) fail(node, where + ": expected a map of name, src_lang, tgt_lang, train...");
    CorpusFiles corpus;
    if (node["name"]) corpus.name = text(node["name"], where + ": name");
    const std::string what = corpus.name.empty() ? where : "corpus '" + corpus.name + "'";
    for (const auto& entry : node) {
      const std::string key = text(entry.first, what);
      if (key == "name") continue;
      if (key == "src_lang") {
        corpus.src_lang = text(entry.second, what + ": src_lang");
      } else if (key == "tgt_lang") {
        corpus.tgt_lang = text(entry.second, what + ": tgt_lang");
      } else if (key == "train" || key == "valid" || key == "test") {
        corpus.splits.push_back(split(entry.second, key, what + ": " + key));
      } else {
        fail(entry.first, what + ": unknown key '" + key +
                              "' (expected name, src_lang, tgt_lang, train, valid, test)");
      }
    }
    for (const char* key : {"name", "src_lang", "tgt_lang", "train"}) {
      if (!node[key]) fail(node, what + ": missing " + key);
    }
    return corpus;
  }

 private:
  std::string resolve(const std::string& file) const {
    const std::filesystem::path path(file);
    return path.is_absolute() || file.empty() ? file : (folder_ / path).string();
  }

  std::string path_;
  std::filesystem::path folder_;
};

}  // namespace

std::vector<CorpusFiles> read_corpora_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_cannot_open("corpora manifest", path);
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                std::to_string(e.mark.column + 1) +
                                ": YAML syntax error: " + e.msg);
  }
  const Reader reader(path);
  if (!root.IsMap()) reader.fail(root, "expected a map with the key corpora (a list of corpora)");
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (key != "corpora") reader.fail(entry.first, "unknown key '" + key + "' (expected corpora)");
  }
  if (!root["corpora"])
    reader.fail(root, "expected a map with the key corpora (a list of corpora)");
  const YAML::Node list = root["corpora"];
  if (!list.IsSequence() || list.size() == 0) {
    reader.fail(list, "corpora: expected a list of at least one corpus");
  }
  std::vector<CorpusFiles> corpora;
  for (size_t k = 0; k < list.size(); ++k) corpora.push_back(reader.corpus(list[k], k));
  return corpora;
}

}  // namespace tandem::data
