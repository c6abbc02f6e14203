#pragma once

// A minimal blocking HTTP/1.1 keep-alive client for the load drivers in bench/ (no client
// library, so the numbers are the server's): requests with Content-Length or chunked
// responses, and chunked watch streams; plain TCP or TLS (OpenSSL), with a bearer token.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qm::bench {

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  ERR_print_errors_fp(stderr);
  std::exit(1);
}

// Thrown instead of exiting when ClientConfig::throw_on_io_error is set: the server went away
// (refused, reset, closed mid-answer). Fault tests count such a request as unacknowledged.
struct ConnectionLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where and how to connect:
//   --url http[s]://HOST:PORT  https means TLS with the server's certificate verified
//   --ca-file PATH             CA bundle to verify it with (default: the system's)
//   --token-file PATH          first line is the bearer token (or --token TOKEN)
struct ClientConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  bool tls = false;
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
  std::string ca_file;
  bool throw_on_io_error = false;  // throw ConnectionLost instead of exiting

  static bool IsFlag(const std::string& flag) {
    return flag == "--url" || flag == "--token" || flag == "--token-file" || flag == "--ca-file";
  }

  // Takes one of the IsFlag flags and its value; exits with a message on a bad one.
  void Set(const std::string& flag, const std::string& value) {
    if (flag == "--url") {
      const auto scheme_end = value.find("://");
      const std::string scheme = scheme_end == std::string::npos ? "" : value.substr(0, scheme_end);
      if (scheme != "http" && scheme != "https")
        Die("--url must be http://HOST:PORT or https://HOST:PORT");
      tls = scheme == "https";
      std::string hp = value.substr(scheme_end + 3);
      hp = hp.substr(0, hp.find('/'));
      const auto colon = hp.rfind(':');
      host = hp.substr(0, colon);
      port = colon == std::string::npos ? (tls ? 443 : 80) : std::atoi(hp.c_str() + colon + 1);
      if (host.empty() || port <= 0 || port > 65535) Die("bad --url " + value);
    } else if (flag == "--token") {
      token = value;
    } else if (flag == "--token-file") {
      std::ifstream in(value);
      if (!in || !std::getline(in, token)) Die("cannot read --token-file " + value);
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
        token.pop_back();
      if (token.empty()) Die("--token-file " + value + " is empty");
    } else if (flag == "--ca-file") {
      ca_file = value;
    }
  }
};

// The one TLS context of the process, made by the first TLS connection.
inline SSL_CTX* SharedTlsContext(const std::string& ca_file) {
  static SSL_CTX* const ctx = [&] {
    std::signal(SIGPIPE, SIG_IGN);  // SSL_write has no MSG_NOSIGNAL
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    if (c == nullptr) Die("SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
    const int loaded = ca_file.empty() ? SSL_CTX_set_default_verify_paths(c)
                                       : SSL_CTX_load_verify_locations(c, ca_file.c_str(), nullptr);
    if (loaded != 1) Die("cannot load CA file " + (ca_file.empty() ? "(system default)" : ca_file));
    return c;
  }();
  return ctx;
}

class Connection {
 public:
  explicit Connection(const ClientConfig& cfg) : cfg_(cfg) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = getaddrinfo(cfg.host.c_str(), std::to_string(cfg.port).c_str(), &hints, &res);
        rc != 0) {
      Die("resolve " + cfg.host + ": " + gai_strerror(rc));
    }
    for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
      fd_ = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd_ >= 0 && connect(fd_, ai->ai_addr, ai->ai_addrlen) != 0) {
        close(fd_);
        fd_ = -1;
      }
    }
    freeaddrinfo(res);
    if (fd_ < 0) {
      if (cfg.throw_on_io_error) throw ConnectionLost("connect: " + std::string(strerror(errno)));
      std::perror(("connect " + cfg.host + ":" + std::to_string(cfg.port)).c_str());
      std::exit(1);
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (cfg.tls) {
      try {
        StartTls();
      } catch (const ConnectionLost&) {
        if (ssl_ != nullptr) SSL_free(ssl_);
        close(fd_);
        throw;
      }
    }
  }
  ~Connection() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends a request and reads the whole response; returns the status code.
  int Request(const std::string& method, const std::string& path, const std::string& body,
              std::string* out, const std::string& content_type = "application/json") {
    std::string req = Head(method, path);
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
      req += "Content-Type: " + content_type +
             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n" + body;
    Send(req);
    return ReadResponse(out);
  }

  // Starts a watch: sends the request and reads the response head; returns its status code
  // (anything but 200 leaves the body unread: drop the connection).
  int StartStream(const std::string& path) {
    Send(Head("GET", path) + "\r\n");
    std::string head;
    ReadHead(&head);
    return std::atoi(head.c_str() + 9);
  }

  // Ends the connection from another thread: a read blocked in NextChunk returns (as an I/O
  // error, so use it with throw_on_io_error).
  void Shutdown() { ::shutdown(fd_, SHUT_RDWR); }

  // Reads the next chunk of a chunked stream; false at the end.
  bool NextChunk(std::string* chunk) {
    std::string line = ReadLine();
    size_t size = std::strtoul(line.c_str(), nullptr, 16);
    if (size == 0) return false;
    *chunk = ReadN(size);
    ReadLine();
    return true;
  }

 private:
  void StartTls() {
    ssl_ = SSL_new(SharedTlsContext(cfg_.ca_file));
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) Die("SSL_new failed");
    // The certificate must name the host we dialled: an IP SAN for an address, else DNS.
    in6_addr ip;
    const bool is_ip = inet_pton(AF_INET, cfg_.host.c_str(), &ip) == 1 ||
                       inet_pton(AF_INET6, cfg_.host.c_str(), &ip) == 1;
    const char* name = cfg_.host.c_str();
    const bool named =
        is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name) == 1
              : SSL_set1_host(ssl_, name) == 1 && SSL_set_tlsext_host_name(ssl_, name) == 1;  // SNI
    if (!named) Die("cannot set the expected TLS peer name " + cfg_.host);
    if (SSL_connect(ssl_) != 1) {
      if (cfg_.throw_on_io_error) throw ConnectionLost("TLS handshake failed");
      const long v = SSL_get_verify_result(ssl_);
      Die("TLS handshake with " + cfg_.host + ":" + std::to_string(cfg_.port) + " failed" +
          (v != X509_V_OK ? std::string(": ") + X509_verify_cert_error_string(v) : ""));
    }
  }

  std::string Head(const std::string& method, const std::string& path) const {
    std::string h = method + " " + path + " HTTP/1.1\r\nHost: " + cfg_.host + ":" +
                    std::to_string(cfg_.port) + "\r\nAccept: application/json\r\n";
    if (!cfg_.token.empty()) h += "Authorization: Bearer " + cfg_.token + "\r\n";
    return h;
  }

  void Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const size_t len = std::min<size_t>(data.size() - off, 1 << 30);
      ssize_t n = ssl_ != nullptr ? SSL_write(ssl_, data.data() + off, static_cast<int>(len))
                                  : send(fd_, data.data() + off, len, MSG_NOSIGNAL);
      if (n <= 0) {
        if (cfg_.throw_on_io_error) throw ConnectionLost("write failed");
        if (ssl_ != nullptr) Die("TLS write failed");
        std::perror("send");
        std::exit(1);
      }
      off += static_cast<size_t>(n);
    }
  }

  void Fill() {
    char tmp[65536];
    ssize_t n = ssl_ != nullptr ? SSL_read(ssl_, tmp, sizeof(tmp)) : recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      if (cfg_.throw_on_io_error) throw ConnectionLost("connection closed");
      std::fprintf(stderr, "connection closed\n");
      std::exit(1);
    }
    buf_.append(tmp, static_cast<size_t>(n));
  }

  std::string ReadLine() {
    size_t eol;
    while ((eol = buf_.find("\r\n")) == std::string::npos) Fill();
    std::string line = buf_.substr(0, eol);
    buf_.erase(0, eol + 2);
    return line;
  }

  std::string ReadN(size_t n) {
    while (buf_.size() < n) Fill();
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  void ReadHead(std::string* head) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) Fill();
    *head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
  }

  int ReadResponse(std::string* body) {
    std::string head;
    ReadHead(&head);
    int code = std::atoi(head.c_str() + 9);
    auto cl = head.find("Content-Length: ");
    if (cl != std::string::npos) {
      *body = ReadN(std::strtoul(head.c_str() + cl + 16, nullptr, 10));
    } else {
      body->clear();
      std::string chunk;
      while (NextChunk(&chunk)) *body += chunk;
      ReadLine();
    }
    return code;
  }

  const ClientConfig cfg_;
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string buf_;
};

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace qm::bench
