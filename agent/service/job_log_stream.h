// A led job's log as a stream to one caller (JobLogs, an attached SubmitJob): the lines its
// record's log file holds, then the JobEnd once the record is final. The job never waits for a
// reader: it writes the file and bumps its change signal (LedJobs::changedOf), and this follows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/jobs/led_jobs.h"
#include "agent/records/job_log.h"
#include "hvd/v1/agent.pb.h"

namespace hvd::agent::service {

// Streams job `jobId`'s log lines matching `filter` from `*offset` to `emitLines`, and with
// `follow` keeps going until the job has ended. Once the job has ended (and its log is read to
// the end) `emitEnd` gets its JobEnd. Returns false when an emit failed or `cancelled()` became
// true (the caller went away). Lines come in the batches they were read in, with their host and
// time. `onRecord`, when given, sees the job's record at every wake-up (an attached run tells
// its client about restarts from it); returning false ends the stream as a failed emit.
bool streamJobLog(const jobs::LedJobs& led, const std::string& jobId,
                  const records::LogFilter& filter, uint64_t* offset, bool follow,
                  const std::function<bool()>& cancelled,
                  const std::function<bool(const std::vector<records::LogLine>&)>& emitLines,
                  const std::function<bool(const v1::JobEnd&)>& emitEnd,
                  const std::function<bool(const v1::JobInfo&)>& onRecord = nullptr);

}  // namespace hvd::agent::service
