#pragma once

// A minimal blocking HTTP/1.1 keep-alive client for the load drivers in bench/ (no client
// library, so the numbers are the server's): requests with Content-Length or chunked
// responses, and chunked watch streams.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace qm::bench {

class Connection {
 public:
  Connection(const std::string& host, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      std::perror("connect");
      std::exit(1);
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Connection() { close(fd_); }

  // Sends a request and reads the whole response; returns the status code.
  int Request(const std::string& method, const std::string& path, const std::string& body,
              std::string* out, const std::string& content_type = "application/json") {
    std::string req =
        method + " " + path + " HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n";
    if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
      req += "Content-Type: " + content_type +
             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    }
    req += "\r\n" + body;
    Send(req);
    return ReadResponse(out);
  }

  // Starts a watch: sends the request and reads the response head.
  void StartStream(const std::string& path) {
    Send("GET " + path + " HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n\r\n");
    std::string head;
    ReadHead(&head);
  }

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
  void Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        std::perror("send");
        std::exit(1);
      }
      off += static_cast<size_t>(n);
    }
  }

  void Fill() {
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
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

  int fd_;
  std::string buf_;
};

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace qm::bench
