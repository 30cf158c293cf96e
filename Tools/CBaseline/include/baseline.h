#ifndef TRIPS_BASELINE_H
#define TRIPS_BASELINE_H

#include <stddef.h>

/// One trip as a C program would hold it.
typedef struct {
  unsigned char id[16];
  char *name;
  char *destination;
  double start_date;  /* seconds since 2001-01-01, as the Swift layer stores dates */
  double end_date;
  double latitude;
  double longitude;
  char *place_id;     /* the raw identifier, or NULL */
} tb_trip;

/// Fetched trips: a growable array the caller frees with tb_free_trips.
typedef struct {
  tb_trip *trips;
  size_t count;
  size_t capacity;
  size_t sections; /* for sectioned fetches: how many groups */
} tb_trips;

/// Opens a store file created by the Swift layer, with the same settings it uses
/// (WAL, synchronous NORMAL, the same page cache, busy timeout). Returns NULL on failure.
void *tb_open(const char *path, int cache_kib);
void tb_close(void *db);
/// Folds the write-ahead log into the store file and truncates it (what a server's routine
/// checkpoints leave); SQLITE_OK on success.
int tb_checkpoint(void *db);

/// Inserts trips the way ModelContext.save() does: one IMMEDIATE transaction, a history
/// transaction row, then per trip the unique-id lookup, the INSERT (place id encoded as the same
/// JSON) and the history change row. Returns 0 on success.
int tb_insert(void *db, const tb_trip *trips, size_t count, const char *author);

/// SELECT every column of every trip in `order_by` order (a SQL fragment) into `out`.
int tb_fetch(void *db, const char *where_sql, const char *text_parameter, const char *order_by,
             int section_column, tb_trips *out);

/// SELECT count(*) of trips matching `where_sql` with one text parameter.
long tb_count(void *db, const char *where_sql, const char *text_parameter);

/// The smallest box over the trips' coordinates (largest-gap method, the same rules as the
/// Swift Geo module). Returns 0 when there is a box.
int tb_bounds(void *db, double *west, double *south, double *east, double *north, size_t *count);

void tb_free_trips(tb_trips *trips);

/// A checksum of fetched trips (ids and coordinates), to compare both sides' results.
unsigned long long tb_checksum(const tb_trips *trips);

/// The SQLite library version, for reports.
const char *sqlite3_libversion_shim(void);

/// Bytes SQLite has allocated in this process now (page caches included).
long long tb_sqlite_memory_used(void);

/// The relationship baseline (baseline_relations.c), on a store the Swift layer made with
/// owners, their items (owner, position) and their stays (owner). Fetches every owner with
/// its items (ordered by position) and, when `prefetch`, its stay: each relationship in one
/// query for all the owners (their keys as one JSON parameter), or, without `prefetch`, the
/// items one query per owner. Every row is read into memory; `checksum` folds each owner's
/// ordinal times its item count, its items' positions in order and its stay. 0 on success.
int tb_rel_fetch(void *db, int prefetch, unsigned long long *checksum);
/// Deletes an owner with its items and stay as ModelContext.save() applies a cascade: one
/// IMMEDIATE transaction, a history transaction row, the related keys selected, then each
/// related row deleted with its history change row, then the owner. 0 on success.
int tb_rel_cascade(void *db, long long owner, const char *author);
/// The many-to-many baseline: every group ("m2m_groups") with its members ("m2m_members",
/// linked through the join table "_m2m_members_groups"), as a prefetch reads them: the groups,
/// the links of all of them in one query (their keys as one JSON parameter, over the join
/// table's index on target), then the members linked, by primary key. `checksum` folds each
/// group's ordinal times its member count and its members' weights in key order. 0 on success.
int tb_m2m_fetch(void *db, unsigned long long *checksum);
/// The items whose owner has `name`, through a join, read into memory; adds each one's
/// position + 1 to `checksum`. Returns how many, -1 on failure.
long tb_rel_items_of_owner_named(void *db, const char *name, unsigned long long *checksum);

/// The libpq baseline (baseline_pq.c): the same work against a PostgreSQL store the Swift
/// layer created. `tbpq_open` takes a libpq connection string; NULL on failure.
void *tbpq_open(const char *conninfo);
void tbpq_close(void *db);
/// Runs SQL without parameters; 0 on success.
int tbpq_exec(void *db, const char *sql);
/// Inserts as ModelContext.save() does on PostgreSQL: one transaction under the store's write
/// lock, a history transaction row, then per trip the unique-id lookup, the INSERT and the
/// history change row (each a prepared statement, keys returned), NOTIFY, COMMIT.
int tbpq_insert(void *db, const tb_trip *trips, size_t count, const char *author);
/// As tb_fetch; `where_sql` uses $1 for the text parameter.
int tbpq_fetch(void *db, const char *where_sql, const char *text_parameter, const char *order_by,
               int section_column, tb_trips *out);
/// As tb_count; `where_sql` uses $1.
long tbpq_count(void *db, const char *where_sql, const char *text_parameter);
/// The server's version, for reports.
const char *tbpq_server_version(void *db);

#endif
