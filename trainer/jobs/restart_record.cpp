#include "trainer/jobs/restart_record.h"

#include <stdexcept>

namespace tandem::jobs {
namespace {

// The names a unit's records give the fields that count in it.
struct FieldNames {
  const char* from;
  const char* ranks;
  const char* failed_in;
};

FieldNames field_names(JobUnit unit) {
  if (unit == JobUnit::kChunk) return {"chunks_done", "ranks", "failed_chunk"};
  return {"step", "world_size", "failed_step"};
}

bool is_field(const std::string& key, const FieldNames& names) {
  for (const char* known : {"event", "restart", "failure", "how", "time", "rank", "host",
                            "dropped_hosts", names.from, names.ranks, names.failed_in}) {
    if (key == known) return true;
  }
  return false;
}

}  // namespace

nlohmann::json RestartRecord::to_json() const {
  const FieldNames names = field_names(unit);
  nlohmann::json record = settings;
  record.update({{"event", "restart"},
                 {"restart", restart},
                 {names.from, from},
                 {"failure", failure},
                 {"how", how},
                 {names.ranks, ranks},
                 {"time", time}});
  if (rank >= 0) record["rank"] = rank;
  if (!host.empty()) record["host"] = host;
  if (failed_in >= 0) record[names.failed_in] = failed_in;
  if (!dropped_hosts.empty()) record["dropped_hosts"] = dropped_hosts;
  return record;
}

RestartRecord RestartRecord::from_json(const nlohmann::json& record) {
  try {
    if (record.at("event") != "restart") throw std::invalid_argument("not a restart");
    RestartRecord r;
    r.unit = record.contains("chunks_done") ? JobUnit::kChunk : JobUnit::kStep;
    const FieldNames names = field_names(r.unit);
    r.restart = record.at("restart").get<int>();
    r.from = record.at(names.from).get<int64_t>();
    r.failure = record.at("failure").get<std::string>();
    r.how = record.at("how").get<std::string>();
    r.ranks = record.at(names.ranks).get<int>();
    r.time = record.at("time").get<std::string>();
    r.rank = record.value("rank", -1);
    r.host = record.value("host", std::string());
    r.failed_in = record.value(names.failed_in, int64_t{-1});
    r.dropped_hosts = record.value("dropped_hosts", std::vector<std::string>{});
    for (const auto& [key, value] : record.items()) {
      if (!is_field(key, names)) r.settings[key] = value;
    }
    return r;
  } catch (const std::exception& e) {  // nlohmann's key and type errors, and the above
    throw std::invalid_argument("not a restart record as the launcher writes it (" +
                                std::string(e.what()) + "): " + record.dump());
  }
}

std::string RestartRecord::text(const std::string& settings_words) const {
  std::string line = "restart " + std::to_string(restart) + " at " + unit_name(unit) + " " +
                     std::to_string(from) + ": " + failure + "; relaunched on " +
                     std::to_string(ranks) + " rank(s)" + settings_words;
  for (size_t k = 0; k < dropped_hosts.size(); ++k) {
    line += (k == 0 ? ", without " : ", ") + dropped_hosts[k];
  }
  return line + " (" + time + ")";
}

}  // namespace tandem::jobs
