namespace go typedefs

enum Kind { A = 1, B = 2 }

typedef i64 UserId
typedef UserId AccountId
typedef AccountId OwnerId
typedef Kind KindAlias
typedef binary Blob
typedef list<OwnerId> Owners
typedef map<UserId, Blob> BlobsByUser

struct Point { 1: i32 x, 2: i32 y }
typedef Point Pt
typedef Pt Pt2
typedef list<Pt2> Path

struct Uses {
  1: UserId user,
  2: OwnerId owner,
  3: KindAlias kind,
  4: Blob blob,
  5: Owners owners,
  6: BlobsByUser blobs,
  7: Pt2 where,
  8: Path path,
  9: optional OwnerId maybe_owner,
  10: map<AccountId, Pt> points,
}
