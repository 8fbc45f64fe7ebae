// Reading a trace file back, plain or gzip-compressed (`--trace-gzip` writes trace.json.gz; the
// trace tools take either, told apart by the gzip magic bytes, not by the name).
#pragma once

#include <zlib.h>

#include <array>
#include <cstdint>
#include <istream>
#include <streambuf>
#include <string>

namespace tpusim {

class TraceFileBuf : public std::streambuf {
 public:
  // Check good() before use. `max_bytes` (0: none) bounds the text read, after inflating: a
  // small gzip file can inflate to gigabytes.
  explicit TraceFileBuf(const std::string& path, std::uint64_t max_bytes = 0)
      : file_(gzopen(path.c_str(), "rb")), max_bytes_(max_bytes) {
    if (file_) gzbuffer(file_, 1 << 17);
  }
  ~TraceFileBuf() override {
    if (file_) gzclose(file_);
  }
  TraceFileBuf(const TraceFileBuf&) = delete;
  TraceFileBuf& operator=(const TraceFileBuf&) = delete;

  bool good() const { return file_ != nullptr; }
  // Whether the file is gzip-compressed (known once something was read).
  bool compressed() const { return file_ && gzdirect(file_) == 0; }
  // Why reading stopped early: "" when it reached the end of a well-formed file.
  const std::string& error() const { return error_; }
  // Whether reading stopped at max_bytes.
  bool too_large() const { return too_large_; }

 protected:
  int_type underflow() override {
    if (!file_ || !error_.empty()) return traits_type::eof();
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    if (n < 0) {
      int code = 0;
      const char* what = gzerror(file_, &code);
      error_ = what && *what ? what : "unreadable";
      return traits_type::eof();
    }
    if (n == 0) {
      int code = Z_OK;
      const char* what = gzerror(file_, &code);
      if (code != Z_OK) error_ = what && *what ? what : "truncated";  // e.g. "unexpected end of file"
      return traits_type::eof();
    }
    bytes_read_ += static_cast<std::uint64_t>(n);
    if (max_bytes_ > 0 && bytes_read_ > max_bytes_) {
      too_large_ = true;
      error_ = "more than " + std::to_string(max_bytes_) + " bytes of text";
      return traits_type::eof();
    }
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(buffer_[0]);
  }

 private:
  gzFile file_;
  std::uint64_t max_bytes_ = 0, bytes_read_ = 0;
  bool too_large_ = false;
  std::array<char, 1 << 16> buffer_{};
  std::string error_;
};

}  // namespace tpusim
