#include "core/active/parking_lot.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ardma {
namespace {

using ::testing::ElementsAre;

// Records what it was answered with.
class RecordingResponder : public Responder {
 public:
  RecordingResponder(std::string name, std::vector<std::string>* log) : name_(name), log_(log) {}
  void Respond(absl::StatusOr<std::string> result) override {
    log_->push_back(name_ + "=" + (result.ok() ? *result : result.status().ToString()));
  }
  bool Alive() const override { return alive; }
  bool alive = true;

 private:
  std::string name_;
  std::vector<std::string>* log_;
};

TEST(ParkingLotTest, WakesInArrivalOrder) {
  ParkingLot lot;
  std::vector<std::string> log;
  absl::Time far = absl::InfiniteFuture();
  std::vector<std::shared_ptr<ParkingLot::Entry>> entries;
  for (const char* name : {"a", "b", "c"}) {
    entries.push_back(lot.Park("k", std::make_shared<RecordingResponder>(name, &log), far));
    lot.FunctionReturned(entries.back(), absl::OkStatus());
  }
  EXPECT_EQ(lot.size(), 3u);
  EXPECT_TRUE(lot.Wake("k", "1"));
  EXPECT_TRUE(lot.Wake("k", "2"));
  EXPECT_FALSE(lot.Wake("other", "x"));
  EXPECT_TRUE(lot.Wake("k", "3"));
  EXPECT_FALSE(lot.Wake("k", "4"));
  EXPECT_THAT(log, ElementsAre("a=1", "b=2", "c=3"));
  EXPECT_EQ(lot.size(), 0u);
}

TEST(ParkingLotTest, WakeBeforeFunctionReturnsIsDeliveredAfter) {
  ParkingLot lot;
  std::vector<std::string> log;
  auto entry =
      lot.Park("k", std::make_shared<RecordingResponder>("a", &log), absl::InfiniteFuture());
  EXPECT_TRUE(lot.Wake("k", "early"));
  EXPECT_TRUE(log.empty());  // the function is still running
  lot.FunctionReturned(entry, absl::OkStatus());
  EXPECT_THAT(log, ElementsAre("a=early"));
}

TEST(ParkingLotTest, FailingFunctionIsUnparkedWithItsError) {
  ParkingLot lot;
  std::vector<std::string> log;
  auto entry =
      lot.Park("k", std::make_shared<RecordingResponder>("a", &log), absl::InfiniteFuture());
  lot.FunctionReturned(entry, absl::InternalError("boom"));
  EXPECT_THAT(log, ElementsAre("a=INTERNAL: boom"));
  EXPECT_FALSE(lot.Wake("k", "late"));
  EXPECT_EQ(lot.size(), 0u);
}

TEST(ParkingLotTest, WakeSkipsDeadAndExpiredWaiters) {
  ParkingLot lot;
  std::vector<std::string> log;
  auto dead = std::make_shared<RecordingResponder>("dead", &log);
  auto e1 = lot.Park("k", dead, absl::InfiniteFuture());
  lot.FunctionReturned(e1, absl::OkStatus());
  dead->alive = false;
  auto e2 = lot.Park("k", std::make_shared<RecordingResponder>("expired", &log),
                     absl::Now() - absl::Seconds(1));
  lot.FunctionReturned(e2, absl::OkStatus());
  auto e3 =
      lot.Park("k", std::make_shared<RecordingResponder>("live", &log), absl::InfiniteFuture());
  lot.FunctionReturned(e3, absl::OkStatus());
  EXPECT_TRUE(lot.Wake("k", "go"));
  EXPECT_THAT(log, ElementsAre("expired=DEADLINE_EXCEEDED: parked request expired", "live=go"));
}

TEST(ParkingLotTest, ExpireAnswersOverdueRequests) {
  ParkingLot lot;
  std::vector<std::string> log;
  absl::Time now = absl::Now();
  auto e1 =
      lot.Park("k", std::make_shared<RecordingResponder>("old", &log), now - absl::Seconds(1));
  lot.FunctionReturned(e1, absl::OkStatus());
  auto e2 = lot.Park("k", std::make_shared<RecordingResponder>("new", &log), now + absl::Hours(1));
  lot.FunctionReturned(e2, absl::OkStatus());
  EXPECT_EQ(lot.Expire(now), 1);
  EXPECT_THAT(log, ElementsAre("old=DEADLINE_EXCEEDED: parked request expired"));
  EXPECT_EQ(lot.size(), 1u);
}

}  // namespace
}  // namespace ardma
