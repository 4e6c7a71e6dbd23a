//===- MetricsTest.cpp - metrics.csv tests --------------------------------===//
#include "runtime/io/Metrics.h"

#include "io/FileUtil.h"

#include "TestDir.h"

#include <cmath>
#include <filesystem>
#include <limits>

using namespace dsrt::io;
using dsrt::io::test::TestDir;
namespace fs = std::filesystem;

TEST(Metrics, WritesAFlushedRowPerStep) {
  TestDir dir;
  MetricsWriter w(dir.path());
  EXPECT_EQ(w.path(), dir.file("metrics.csv"));
  EXPECT_EQ(test::readBytes(w.path()), "step,loss,lr,grad_norm,step_time_s\n");
  w.write(0, 10.8125, 3e-4, 1.5, 0.25);
  // Visible before the writer goes away: every row is flushed.
  EXPECT_EQ(test::readBytes(w.path()), "step,loss,lr,grad_norm,step_time_s\n"
                                       "0,10.8125,0.0003,1.5,0.250000\n");
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  w.write(1, float(2.3456789f), 1.0 / 3.0, -nan, 1.0 / 7.0);
  w.write(2, inf, 0.0, -inf, 12.5);
  EXPECT_EQ(test::readBytes(w.path()), "step,loss,lr,grad_norm,step_time_s\n"
                                       "0,10.8125,0.0003,1.5,0.250000\n"
                                       "1,2.34567881,0.333333333,nan,0.142857\n"
                                       "2,inf,0,-inf,12.500000\n");
}

// Data-parallel runs add the step's communication as integer columns.
TEST(Metrics, ExtraIntegerColumns) {
  TestDir dir;
  MetricsWriter w(dir.path(), {"comm_elements", "comm_calls"});
  w.write(1, 2.5, 0.001, 1.0, 0.5, {58112, 2});
  EXPECT_EQ(test::readBytes(w.path()),
            "step,loss,lr,grad_norm,step_time_s,comm_elements,comm_calls\n"
            "1,2.5,0.001,1,0.500000,58112,2\n");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, w.write(2, 1, 1, 1, 1)),
            w.path() + ": a row with 0 extra values for 2 extra columns");
}

TEST(Metrics, LossScaleColumns) {
  // fp16 runs: a dynamic scale of 2^32 and a static fractional one are
  // written exactly.
  TestDir dir;
  MetricsWriter w(dir.path(), {"loss_scale", "skipped"});
  w.write(1, 2.5, 0.001, NAN, 0.5, {4294967296.0, 1});
  w.write(2, 2.5, 0.001, 1.0, 0.5, {0.75, 0});
  EXPECT_EQ(test::readBytes(w.path()),
            "step,loss,lr,grad_norm,step_time_s,loss_scale,skipped\n"
            "1,2.5,0.001,nan,0.500000,4294967296,1\n"
            "2,2.5,0.001,1,0.500000,0.75,0\n");
}

TEST(Metrics, RefusesToOverwriteAnEarlierRun) {
  TestDir dir;
  { MetricsWriter w(dir.path()); }
  std::string path = dir.file("metrics.csv");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, MetricsWriter w(dir.path())),
            path + ": already has content; refusing to overwrite the metrics "
                   "of an earlier run");
  std::string missing = dir.file("no/such");
  EXPECT_EQ(DSRT_ERROR_OF(IoError, MetricsWriter w(missing)),
            missing + "/metrics.csv: cannot create: No such file or directory");
}
