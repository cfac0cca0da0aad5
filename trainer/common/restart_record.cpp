#include "trainer/train/restart_record.h"

#include <stdexcept>

namespace tandem::train {

nlohmann::json RestartRecord::to_json() const {
  nlohmann::json record{{"event", "restart"},         {"step", step}, {"restart", restart},
                        {"failure", failure},         {"how", how},   {"world_size", world_size},
                        {"accum_steps", accum_steps}, {"time", time}};
  if (rank >= 0) record["rank"] = rank;
  if (!host.empty()) record["host"] = host;
  if (failed_step >= 0) record["failed_step"] = failed_step;
  if (!dropped_hosts.empty()) record["dropped_hosts"] = dropped_hosts;
  return record;
}

RestartRecord RestartRecord::from_json(const nlohmann::json& record) {
  try {
    if (record.at("event") != "restart") throw std::invalid_argument("not a restart");
    RestartRecord r;
    r.restart = record.at("restart").get<int>();
    r.step = record.at("step").get<int64_t>();
    r.failure = record.at("failure").get<std::string>();
    r.how = record.at("how").get<std::string>();
    r.world_size = record.at("world_size").get<int>();
    r.accum_steps = record.at("accum_steps").get<int64_t>();
    r.time = record.at("time").get<std::string>();
    r.rank = record.value("rank", -1);
    r.host = record.value("host", std::string());
    r.failed_step = record.value("failed_step", int64_t{-1});
    r.dropped_hosts = record.value("dropped_hosts", std::vector<std::string>{});
    return r;
  } catch (const std::exception& e) {  // nlohmann's key and type errors, and the above
    throw std::invalid_argument("not a restart record as the launcher writes it (" +
                                std::string(e.what()) + "): " + record.dump());
  }
}

std::string RestartRecord::text() const {
  std::string line = "restart " + std::to_string(restart) + " at step " + std::to_string(step) +
                     ": " + failure + "; relaunched on " + std::to_string(world_size) +
                     " rank(s), " + std::to_string(accum_steps) + " accumulation step(s)";
  for (size_t k = 0; k < dropped_hosts.size(); ++k) {
    line += (k == 0 ? ", without " : ", ") + dropped_hosts[k];
  }
  return line + " (" + time + ")";
}

}  // namespace tandem::train
