#include "trainer/jobs/rank_main.h"

#include <exception>
#include <string>

#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/jobs/rank_state.h"

namespace tandem::jobs {

int run_rank(const RankSeat& seat, JobUnit unit, const std::function<RankEnd(int64_t& at)>& work) {
  using Outcome = RankState::Outcome;
  rank_state::open(seat.rank, seat.host);
  int64_t at = -1;
  try {
    const RankEnd end = work(at);
    rank_state::end(end.stop_signal != 0 ? Outcome::kStopped : Outcome::kFinished, end.at,
                    end.exit_code, end.stop_signal);
    return end.exit_code;
  } catch (const PeerTimeout& e) {
    log::error(e.what());
    rank_state::end(Outcome::kTimedOut, -1, kExitFailure, 0, e.what());
    seat.abort_job(kExitFailure);
    return kExitFailure;
  } catch (const std::exception& e) {
    const std::string where =
        at >= 0 ? std::string("failed in ") + unit_name(unit) + " " + std::to_string(at) + ": " : "";
    log::error(where + e.what());
    const int code = exit_code_for(e);
    rank_state::end(Outcome::kFailed, at, code, 0, e.what());
    if (seat.size > 1) seat.abort_job(code);  // no rank may be left waiting for another
    return code;
  }
}

}  // namespace tandem::jobs
