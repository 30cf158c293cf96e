import Foundation
import Testing

@testable import TripService

/// The ETag of an answer: its bytes but the value of its `timeStamp` member.
@Suite struct ValidatorsTests {
  func page(_ features: String, stamp: String, tail: String = #","links":[]}"#) -> Data {
    Data(
      (#"{"type":"FeatureCollection","features":["# + features + #"],"timeStamp":""# + stamp
        + "\"" + tail).utf8)
  }

  @Test func theTimeStampIsLeftOutAndEveryOtherByteCounts() {
    let features = String(repeating: #"{"type":"Feature","id":"a"},"#, count: 300) + "{}"
    let a = Validators.tag(of: page(features, stamp: "2026-12-05T10:00:00Z"))
    #expect(a == Validators.tag(of: page(features, stamp: "2027-01-01T00:00:01Z")))
    #expect(a.hasPrefix("W/\"") && a.count == 20)
    // A byte changed in the features (word-folded), in the member after the stamp, at the very
    // end (the bytes left after the last whole word): each a new tag.
    var changed = features
    changed.replace("\"a\"", with: "\"b\"", maxReplacements: 1)
    #expect(a != Validators.tag(of: page(changed, stamp: "2026-12-05T10:00:00Z")))
    #expect(
      a
        != Validators.tag(
          of: page(features, stamp: "2026-12-05T10:00:00Z", tail: #","links":[1]}"#)))
    #expect(
      Validators.tag(of: Data("abcdefghijk".utf8)) != Validators.tag(of: Data("abcdefghijl".utf8)))
    // A document without the member: every byte counts.
    #expect(Validators.tag(of: Data()) != Validators.tag(of: Data("x".utf8)))
  }
}

/// Who a fair share counts: an address, or an IPv6 address's /64.
@Suite struct ShareKeyTests {
  @Test(
    "IPv4 as itself, IPv4-mapped IPv6 as its IPv4, IPv6 by its /64 in any spelling, garbage as itself"
  )
  func shareKeys() {
    #expect(HTTPServer.shareKey("192.0.2.7") == "192.0.2.7")
    #expect(HTTPServer.shareKey("::ffff:192.0.2.7") == "192.0.2.7")
    #expect(HTTPServer.shareKey("2001:db8:0:1::5") == "2001:db8:0:1::/64")
    #expect(HTTPServer.shareKey("2001:0db8:0000:0001:ffff:1:2:3") == "2001:db8:0:1::/64")
    #expect(HTTPServer.shareKey("2001:db8:0:2::5") == "2001:db8:0:2::/64")
    #expect(HTTPServer.shareKey("::1") == "0:0:0:0::/64")
    #expect(HTTPServer.shareKey("") == "")
    #expect(HTTPServer.shareKey("not:an:address") == "not:an:address")
  }
}
