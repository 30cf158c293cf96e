#ifndef TRIPS_CMICROHTTPD_SHIM_H
#define TRIPS_CMICROHTTPD_SHIM_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <microhttpd.h>

/// The daemon's settings: what MHD_start_daemon's variadic options would carry, which Swift
/// cannot pass. Zero means "libmicrohttpd's default" for the numbers; NULL for the pointers.
struct trips_mhd_settings {
  unsigned int flags;
  uint16_t port;
  const struct sockaddr *address;
  unsigned int connection_limit;
  unsigned int per_ip_connection_limit;
  unsigned int connection_timeout_seconds;
  unsigned int thread_pool_size;
  size_t connection_memory_limit;
  const char *tls_key_pem;
  const char *tls_cert_pem;
  MHD_RequestCompletedCallback completed;
  void *completed_context;
};

/// The per-request pointer `trips_mhd_raw_target` gives a request whose raw target holds an
/// encoded NUL (`%00`), which libmicrohttpd would decode and cut the path or value at: address
/// 1, which no object has (the server's own per-request pointers are aligned objects).
#define TRIPS_MHD_NUL_TARGET ((void *)(uintptr_t)1)

/// libmicrohttpd's URI log callback: sees the request target before it is decoded. Returns
/// the marker for a target whose path holds `%00`, else NULL (the per-request pointer starts
/// empty). Query values keep their NUL when decoded (their lengths are known), and are
/// refused by name.
static inline void *trips_mhd_raw_target(void *context, const char *uri,
                                        struct MHD_Connection *connection) {
  (void)context;
  (void)connection;
  for (const char *p = uri; p && p[0] && p[0] != '?' && p[1] && p[2]; p++) {
    if (p[0] == '%' && p[1] == '0' && p[2] == '0') return TRIPS_MHD_NUL_TARGET;
  }
  return NULL;
}

/// Whether a per-request pointer is the marker of a target with `%00`.
static inline int trips_mhd_is_nul_target(const void *pointer) {
  return pointer == TRIPS_MHD_NUL_TARGET;
}

/// Starts a daemon with `settings`; NULL on failure (errno tells why, when it can).
static inline struct MHD_Daemon *trips_mhd_start(
    const struct trips_mhd_settings *settings, MHD_AccessHandlerCallback handler,
    void *handler_context) {
  struct MHD_OptionItem options[16];
  int count = 0;
  // Every daemon checks raw targets for `%00` (see trips_mhd_raw_target).
  options[count++] =
      (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)trips_mhd_raw_target, NULL};
  if (settings->address)
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)settings->address};
  if (settings->connection_limit)
    options[count++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, settings->connection_limit, NULL};
  if (settings->per_ip_connection_limit)
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                                settings->per_ip_connection_limit, NULL};
  if (settings->connection_timeout_seconds)
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                                settings->connection_timeout_seconds, NULL};
  if (settings->thread_pool_size)
    options[count++] =
        (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, settings->thread_pool_size, NULL};
  if (settings->connection_memory_limit)
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                                (intptr_t)settings->connection_memory_limit, NULL};
  if (settings->tls_key_pem)
    options[count++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)settings->tls_key_pem};
  if (settings->tls_cert_pem)
    options[count++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)settings->tls_cert_pem};
  if (settings->completed)
    options[count++] = (struct MHD_OptionItem){
        MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)settings->completed, settings->completed_context};
  // Strict parsing (RFC 9112): an HTTP/1.1 request without Host, and spaces where the grammar
  // has none, are refused, not guessed at.
  options[count++] = (struct MHD_OptionItem){MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL};
  options[count++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  return MHD_start_daemon(settings->flags, settings->port, NULL, NULL, handler, handler_context,
                          MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/// The port the daemon listens on (useful after asking for port 0).
static inline uint16_t trips_mhd_port(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

/// How many connections the daemon has open.
static inline unsigned int trips_mhd_connections(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info ? info->num_connections : 0;
}

/// A response holding a copy of `size` bytes at `data` (libmicrohttpd frees it).
static inline struct MHD_Response *trips_mhd_response_copy(size_t size, const void *data) {
  return MHD_create_response_from_buffer(size, (void *)data, MHD_RESPMEM_MUST_COPY);
}

/// A response of unknown length whose bytes `reader` supplies as they come (a stream of
/// Server-Sent Events); `release` is called once when libmicrohttpd is done with it.
static inline struct MHD_Response *trips_mhd_response_stream(
    MHD_ContentReaderCallback reader, void *context, MHD_ContentReaderFreeCallback release) {
  return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, context, release);
}

/// Cuts a connection from another thread: a reset (no lingering data) and a shutdown of its
/// socket, so that libmicrohttpd's next read or write on it fails and it closes the connection
/// (it still owns and closes the descriptor). For a stream client dropped for reading nothing.
static inline void trips_mhd_connection_abort(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == NULL) return;
  int fd = info->connect_fd;
  struct linger reset = {1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  (void)shutdown(fd, SHUT_RDWR);
}

/// The socket of `connection`, or -1.
static inline int trips_mhd_connection_fd(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info == NULL ? -1 : info->connect_fd;
}

/// Whether the peer of socket `fd` has closed or reset it: a peek at it that neither waits nor
/// consumes (bytes waiting, a pipelined request, say, mean it is open). 0 when open or unknown.
static inline int trips_socket_closed(int fd) {
  if (fd < 0) return 0;
  char byte;
  ssize_t count = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (count == 0) return 1;
  if (count > 0) return 0;
  return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : 1;
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux: a thread's own nice
/// value, by its id).
static inline void trips_thread_nice(int nice) {
#ifdef SYS_gettid
  (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
#endif
}

/// The client address of `connection` as text in `buffer` (an IPv4 or IPv6 address, no
/// port); 0 on success, -1 when it is not known.
static inline int trips_mhd_client_address(struct MHD_Connection *connection, char *buffer,
                                           size_t size) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == NULL || info->client_addr == NULL) return -1;
  const struct sockaddr *address = info->client_addr;
  const void *raw = NULL;
  if (address->sa_family == AF_INET) {
    raw = &((const struct sockaddr_in *)(const void *)address)->sin_addr;
  } else if (address->sa_family == AF_INET6) {
    raw = &((const struct sockaddr_in6 *)(const void *)address)->sin6_addr;
  } else {
    return -1;
  }
  return inet_ntop(address->sa_family, raw, buffer, (socklen_t)size) == NULL ? -1 : 0;
}

#endif