// See runs_index.hpp.
#include "store/runs_index.hpp"

#include <algorithm>
#include <future>
#include <string_view>

#include "git/cache_repo_impl.hpp"
#include "git/git_error.hpp"
#include "git/git_handle.hpp"
#include "git/oid_text.hpp"
#include "git/repo_objects.hpp"
#include "inflight/core/bounded_json.hpp"
#include "inflight/core/branch_name.hpp"
#include "remote/push_sources.hpp"

namespace inflight::checkpoint {

namespace {

// One file's lines, parsed: a line's number is its place plus one. `cut` when the file has more
// than kMaxIndexFileLines lines: the rest is not read.
struct ParsedFile {
  std::vector<Result<IndexLine>> lines;
  std::vector<std::string_view> raw;  // each line's text, in the text parsed
  bool cut = false;
};

ParsedFile parse_lines(std::string_view text, Removals removals) {
  ParsedFile file;
  while (!text.empty()) {
    if (file.lines.size() == kMaxIndexFileLines) {
      file.cut = true;
      break;
    }
    const auto end = text.find('\n');
    file.raw.push_back(text.substr(0, end));
    file.lines.push_back(parse_index_line(file.raw.back(), removals));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return file;
}

// The log's text read and not yet parsed is at most this much (with one file more).
inline constexpr std::size_t kParseBatchBytes = 32 * 1024 * 1024;

// Each file parsed alone, those after the first half of the bytes on a second thread: at 100,000
// runs the parse is most of a listing's time, and it touches nothing but the text. Where no
// thread can be started, this one parses them too.
std::vector<ParsedFile> parse_files(const std::vector<std::string>& texts, Removals removals) {
  std::vector<ParsedFile> parsed(texts.size());
  const auto parse = [&](std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) parsed[i] = parse_lines(texts[i], removals);
  };
  std::size_t total = 0;
  for (const auto& text : texts) total += text.size();
  std::size_t split = 0;
  for (std::size_t bytes = 0; split < texts.size() && bytes < total / 2; ++split)
    bytes += texts[split].size();
  if (split == texts.size()) {
    parse(0, split);
    return parsed;
  }
  auto second = std::async(std::launch::async | std::launch::deferred, parse, split, texts.size());
  parse(0, split);
  second.get();
  return parsed;
}

class IndexReader {
 public:
  IndexReader(CacheRepo& cache, const LogReading& how)
      : git_(raw_repo(cache)), odb_(open_odb(git_)), how_(how) {}

  void read_snapshot(const std::string& commit) {
    const TreeHandle root = tree_of(lookup_commit(git_, commit).get());
    if (!has_layout(root.get(), kRunsRef)) return;
    const auto* buckets = subtree(root.get(), "b");
    if (buckets == nullptr) return;
    const TreeHandle tree = lookup_tree(git_, *git_tree_entry_id(buckets));
    for (std::size_t i = 0; i < git_tree_entrycount(tree.get()); ++i)
      read_bucket(git_tree_entry_byindex(tree.get(), i));
  }

  void read_log(const std::string& tip) {
    std::vector<CommitHandle> deltas;  // newest first
    CommitHandle commit = lookup_commit(git_, tip);
    while (git_commit_parentcount(commit.get()) > 0) {
      if (deltas.size() == how_.max_commits) {
        problem("the log is longer than " + std::to_string(how_.max_commits) +
                " commits: the older ones are not read (inflight runs compact)");
        index_.log_commits = deltas.size();
        return apply(deltas);
      }
      CommitHandle parent = lookup_commit(git_, *git_commit_parent_id(commit.get(), 0));
      deltas.push_back(std::move(commit));
      commit = std::move(parent);
    }
    if (!has_layout(tree_of(commit.get()).get(), kRunsLogRef)) return;
    index_.log_commits = deltas.size();
    apply(deltas);
  }

  RunsIndex take() { return std::move(index_); }

 private:
  void problem(std::string what) { index_.problems.push_back(std::move(what)); }

  const git_tree_entry* subtree(const git_tree* tree, const char* name) {
    const auto* entry = git_tree_entry_byname(tree, name);
    return entry != nullptr && git_tree_entry_filemode(entry) == GIT_FILEMODE_TREE ? entry
                                                                                   : nullptr;
  }

  // The blob at `entry`, checked to be one and within kMaxIndexFileBytes before it is read.
  std::optional<std::string> read_file(const git_tree_entry* entry, const std::string& path) {
    std::size_t size = 0;
    git_object_t type{};
    if (git_tree_entry_filemode(entry) != GIT_FILEMODE_BLOB ||
        git_odb_read_header(&size, &type, odb_.get(), git_tree_entry_id(entry)) < 0 ||
        type != GIT_OBJECT_BLOB) {
      git_error_clear();
      problem(path + ": not a file");
      return std::nullopt;
    }
    if (size > kMaxIndexFileBytes) {
      problem(path + ": larger than " + std::to_string(kMaxIndexFileBytes) + " bytes");
      return std::nullopt;
    }
    git_blob* raw = nullptr;
    git_check(git_blob_lookup(&raw, git_, git_tree_entry_id(entry)), "read " + path);
    const BlobHandle blob(raw);
    return std::string(static_cast<const char*>(git_blob_rawcontent(blob.get())),
                       static_cast<std::size_t>(git_blob_rawsize(blob.get())));
  }

  bool has_layout(const git_tree* tree, std::string_view ref) {
    const auto* entry = git_tree_entry_byname(tree, "layout");
    const auto text =
        entry != nullptr ? read_file(entry, std::string(ref) + ":layout") : std::nullopt;
    if (text == kRunsLayout) return true;
    problem(std::string(ref) + ": no layout file saying 'inflight-runs 2'; not read");
    return false;
  }

  void read_bucket(const git_tree_entry* bucket) {
    const std::string name = git_tree_entry_name(bucket);
    const auto path = "b/" + printable(name);
    if (git_tree_entry_filemode(bucket) != GIT_FILEMODE_TREE || name.size() != 2 ||
        name.find_first_not_of("0123456789abcdef") != std::string::npos)
      return problem(path + ": not a bucket (two lower-case hex digits)");
    const TreeHandle segments = lookup_tree(git_, *git_tree_entry_id(bucket));
    const auto count = git_tree_entrycount(segments.get());
    if (count > kMaxSegmentsPerBucket)
      return problem(path + ": more than " + std::to_string(kMaxSegmentsPerBucket) +
                     " segments; not read");
    for (std::size_t i = 0; i < count; ++i) {  // tree order is name order: oldest first
      const auto* segment = git_tree_entry_byindex(segments.get(), i);
      const auto segment_path = path + "/" + printable(git_tree_entry_name(segment));
      if (const auto text = read_file(segment, segment_path))
        take_lines(parse_lines(*text, Removals::refused), segment_path, name);
    }
  }

  // A file's lines in order onto the index, the last line of an id winning; a bad one is a
  // problem of its own.
  void take_lines(ParsedFile file, const std::string& path,
                  const std::optional<std::string>& bucket) {
    for (std::size_t i = 0; i < file.lines.size(); ++i) {
      auto& parsed = file.lines[i];
      const auto where = path + " line " + std::to_string(i + 1);
      if (!parsed) {
        problem(where + ": " + parsed.error().message);
      } else if (bucket && runs_bucket(parsed->id) != *bucket) {
        problem(where + ": run " + parsed->id + " belongs in bucket " + runs_bucket(parsed->id));
      } else {
        if (how_.keep_lines) index_.lines.insert_or_assign(parsed->id, std::string(file.raw[i]));
        if (parsed->entry) {
          index_.removed.erase(parsed->id);
          index_.entries.insert_or_assign(parsed->id, std::move(*parsed->entry));
        } else {
          index_.entries.erase(parsed->id);
          index_.removed.insert(parsed->id);
        }
      }
    }
    if (file.cut)
      problem(path + ": more than " + std::to_string(kMaxIndexFileLines) +
              " lines; the rest is not read");
  }

  // The deltas, newest first as walked, read oldest first: files read on this thread (libgit2's),
  // up to kParseBatchBytes at a time, then parsed, then taken in order.
  void apply(const std::vector<CommitHandle>& deltas) {
    std::vector<std::string> paths;
    std::vector<std::string> texts;
    std::size_t held = 0;
    const auto take_held = [&] {
      auto parsed = parse_files(texts, Removals::allowed);
      for (std::size_t i = 0; i < parsed.size(); ++i)
        take_lines(std::move(parsed[i]), paths[i], std::nullopt);
      paths.clear();
      texts.clear();
      held = 0;
    };
    for (auto it = deltas.rbegin(); it != deltas.rend(); ++it) {
      const TreeHandle tree = tree_of(it->get());
      const auto* entry = git_tree_entry_byname(tree.get(), "entries.jsonl");
      auto path = std::string(kRunsLogRef) + " " +
                  std::string(git_oid_tostr_s(git_commit_id(it->get()))) + ":entries.jsonl";
      if (entry == nullptr) {
        problem(path + ": missing");
        continue;
      }
      if (auto text = read_file(entry, path)) {
        held += text->size();
        paths.push_back(std::move(path));
        texts.push_back(std::move(*text));
        if (held >= kParseBatchBytes) take_held();
      }
    }
    take_held();
  }

  git_repository* git_;
  OdbHandle odb_;
  LogReading how_;
  RunsIndex index_;
};

// A tree of one file, written to `repo`'s object database.
git_oid one_file_tree(git_repository* repo, std::string_view name, std::string_view content) {
  const OdbHandle odb = open_odb(repo);
  git_oid blob;
  git_check(git_odb_write(&blob, odb.get(), content.data(), content.size(), GIT_OBJECT_BLOB),
            "write " + std::string(name));
  std::string tree = "100644 " + std::string(name) + '\0';
  tree.append(reinterpret_cast<const char*>(blob.id), GIT_OID_RAWSZ);
  git_oid oid;
  git_check(git_odb_write(&oid, odb.get(), tree.data(), tree.size(), GIT_OBJECT_TREE),
            "write the tree of " + std::string(name));
  return oid;
}

// `lines` cut at line ends into deltas of at most `max_lines` lines (kMaxIndexFileLines, what a
// reader takes in one file) and kMaxIndexFileBytes bytes each.
std::vector<std::string> delta_files(std::string_view lines,
                                     std::size_t max_lines = kMaxIndexFileLines) {
  std::vector<std::string> files(1);
  std::size_t in_file = 0;
  while (!lines.empty()) {
    const auto line = lines.substr(0, lines.find('\n') + 1);
    if (line.empty() || line.size() > kMaxIndexFileBytes)
      throw std::invalid_argument("a log line of " + std::to_string(line.size()) +
                                  " bytes, or without its newline");
    if (in_file == max_lines || files.back().size() + line.size() > kMaxIndexFileBytes) {
      files.emplace_back();
      in_file = 0;
    }
    files.back() += line;
    ++in_file;
    lines.remove_prefix(line.size());
  }
  return files;
}

// The deltas of `files` on `tip`, or on a new root where it is empty, in the push's own objects.
std::string log_chain(const std::vector<std::string>& files, const std::string& tip,
                      PushSources& objects) {
  git_repository* git = objects.git();
  std::string parent = tip;
  if (parent.empty())
    parent = oid_hex(
        write_commit_on(git, one_file_tree(git, "layout", kRunsLayout), {}, "inflight runs log\n"));
  for (const auto& file : files) {
    if (file.empty()) continue;  // the one file of no line
    const auto count = std::count(file.begin(), file.end(), '\n');
    parent = oid_hex(write_commit_on(git, one_file_tree(git, "entries.jsonl", file), {parent},
                                     "inflight runs: " + std::to_string(count) + " lines\n"));
  }
  return parent;
}

// A compacted log's lines per commit. git's receive-pack stores a pushed pack of fewer than 100
// objects (receive.unpackLimit) as loose objects, which its upload-pack then compresses, and tries
// to delta, at every fetch until its next gc: a listing of a log of 50,000 entries in 4,096-line
// commits took 4 s. In 256-line commits (100 kB each) the pack of any log this long stays a pack.
constexpr std::size_t kCompactedLines = 256;

}  // namespace

RefUpdate runs_log_delta(std::string lines) {
  if (lines.empty()) throw std::invalid_argument("a log delta of no line");
  return {.ref = std::string(kRunsLogRef),
          .commit = "",
          .from = std::nullopt,
          .build = [files = delta_files(lines)](const std::string& tip, PushSources& objects) {
            return log_chain(files, tip, objects);
          }};
}

RefUpdate runs_log_compacted(std::string lines, std::string tip) {
  return {.ref = std::string(kRunsLogRef),
          .commit = "",
          .from = std::move(tip),
          .build = [files = delta_files(lines, kCompactedLines)](const std::string&,
                                                                 PushSources& objects) {
            return log_chain(files, "", objects);
          }};
}

std::size_t runs_log_deltas(std::string_view lines) {
  return lines.empty() ? 0 : delta_files(lines, kCompactedLines).size();
}

RunsIndex read_runs_index(CacheRepo& cache, const std::optional<std::string>& snapshot,
                          const std::optional<std::string>& log_tip, const LogReading& how) {
  IndexReader reader(cache, how);
  if (snapshot) reader.read_snapshot(*snapshot);
  if (log_tip) reader.read_log(*log_tip);
  return reader.take();
}

}  // namespace inflight::checkpoint
