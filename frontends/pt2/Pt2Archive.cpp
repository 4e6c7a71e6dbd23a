//===- Pt2Archive.cpp - torch.export.save archives (.pt2) ----------------===//
#include "frontends/pt2/Pt2Archive.h"
#include "frontends/common/PythonTrace.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <nlohmann/json.hpp>
#include <zip.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace dsc::pt2 {

using json = nlohmann::json;

namespace {

// Bounds on what is read whole into memory: the program's JSON and the
// small text files. Tensors are bounded by their declared shapes.
constexpr uint64_t kMaxJsonBytes = uint64_t(1) << 30, kMaxTextBytes = 4096;

llvm::Error err(const std::string &path, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + why.str());
}

} // namespace

struct Archive::Impl {
  std::string path;
  zip_t *zip = nullptr;
  std::string prefix; // "gpt/"
  struct Stored {
    std::string entry; // the zip entry
    aten::TensorMeta meta;
  };
  std::map<std::string, Stored> tensors; // by PyTorch name

  ~Impl() {
    if (zip)
      zip_discard(zip);
  }

  /// That `entry` holds exactly the bytes `meta` needs (before any is read).
  llvm::Error checkSize(const std::string &name, const std::string &entry,
                        const aten::TensorMeta &meta) const {
    int64_t bytes = aten::scalarTypeBytes(meta.dtype);
    if (!bytes)
      return err(path, "tensor '" + name + "' has element type " +
                           aten::scalarTypeName(meta.dtype) + ", which dsc does not read");
    for (int64_t d : meta.sizes) {
      if (d && bytes > std::numeric_limits<int64_t>::max() / d)
        return err(path, "tensor '" + name + "': its size overflows 64 bits");
      bytes *= d;
    }
    zip_int64_t index = zip_name_locate(zip, entry.c_str(), 0);
    zip_stat_t st;
    zip_stat_init(&st);
    if (index < 0 || zip_stat_index(zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
      return err(path, "tensor '" + name + "': the archive has no '" + entry + "'");
    if (st.size != uint64_t(bytes))
      return err(path, "tensor '" + name + "' has " + llvm::Twine(st.size) +
                           " bytes in the archive ('" + entry + "'), but its shape " +
                           aten::formatSizes(meta.sizes) + " and type " +
                           aten::scalarTypeName(meta.dtype) + " need " + llvm::Twine(bytes));
    return llvm::Error::success();
  }

  /// Reads a whole entry of at most `limit` bytes.
  llvm::Expected<std::string> read(const std::string &name, uint64_t limit) const {
    zip_int64_t index = zip_name_locate(zip, name.c_str(), 0);
    if (index < 0)
      return err(path, "the archive has no '" + name + "'");
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
      return err(path, "cannot read the size of '" + name + "' in the archive");
    if (st.size > limit)
      return err(path, "'" + name + "' is " + llvm::Twine(st.size) +
                           " bytes, more than the " + llvm::Twine(limit) + " expected");
    zip_file_t *f = zip_fopen_index(zip, index, 0);
    if (!f)
      return err(path, "cannot open '" + name + "' in the archive: " + zip_strerror(zip));
    std::string bytes(st.size, '\0');
    zip_int64_t got = st.size ? zip_fread(f, bytes.data(), st.size) : 0;
    zip_fclose(f);
    if (got < 0 || uint64_t(got) != st.size)
      return err(path, "'" + name + "' is truncated or corrupt in the archive");
    return bytes;
  }
};

Archive::~Archive() = default;

namespace {

/// The folder entries of a zip, for zipKind and the prefix.
std::vector<std::string> entryNames(zip_t *z) {
  std::vector<std::string> names;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n && i < 1000000; ++i)
    if (const char *name = zip_get_name(z, i, 0))
      names.push_back(name);
  return names;
}

struct Parser {
  const std::string &path;
  aten::Program &p;

  llvm::Error fail(const llvm::Twine &why) { return err(path, why); }

  /// A float from the JSON: a number, or "Infinity", "-Infinity", "NaN".
  static double number(const json &j) {
    if (j.is_string()) {
      std::string s = j.get<std::string>();
      if (s == "Infinity")
        return std::numeric_limits<double>::infinity();
      if (s == "-Infinity")
        return -std::numeric_limits<double>::infinity();
      return std::numeric_limits<double>::quiet_NaN();
    }
    return j.get<double>();
  }

  /// A size: {"as_int": n}; a symbolic one ({"as_expr": ...}) is refused.
  llvm::Expected<int64_t> size(const json &j, const std::string &value) {
    if (j.is_object() && j.contains("as_int") && j["as_int"].is_number_integer()) {
      int64_t v = j["as_int"].get<int64_t>();
      if (v < 0)
        return fail("tensor '" + value + "' has a negative size");
      return v;
    }
    return fail("tensor '" + value +
                "' has a dynamic size; dsc compiles static shapes: export without "
                "dynamic_shapes (torch.export.export(model, args))");
  }

  llvm::Expected<aten::TensorMeta> meta(const json &j, const std::string &value) {
    aten::TensorMeta m;
    m.dtype = j.at("dtype").get<int>();
    int64_t count = 1;
    for (const json &s : j.at("sizes")) {
      auto v = size(s, value);
      if (!v)
        return v.takeError();
      if (*v && count > std::numeric_limits<int64_t>::max() / *v)
        return fail("tensor '" + value + "': its size overflows 64 bits");
      count *= *v;
      m.sizes.push_back(*v);
    }
    if (m.sizes.size() > 16)
      return fail("tensor '" + value + "' has rank " + llvm::Twine(m.sizes.size()) +
                  "; dsc takes at most 16 dimensions");
    return m;
  }

  llvm::Expected<aten::Arg> arg(const json &j) {
    aten::Arg a;
    if (!j.is_object() || j.size() != 1)
      return fail("an argument is not a one-key object");
    auto [key, v] = *j.items().begin();
    if (key == "as_none") {
      a.kind = aten::Arg::None;
    } else if (key == "as_tensor") {
      a.kind = aten::Arg::Tensor;
      a.tensor = v.at("name").get<std::string>();
    } else if (key == "as_optional_tensor") {
      if (v.contains("as_tensor")) {
        a.kind = aten::Arg::Tensor;
        a.tensor = v["as_tensor"].at("name").get<std::string>();
      }
    } else if (key == "as_tensors") {
      a.kind = aten::Arg::Tensors;
      for (const json &t : v)
        a.tensors.push_back(t.at("name").get<std::string>());
    } else if (key == "as_int") {
      a.kind = aten::Arg::Int;
      a.i = v.get<int64_t>();
    } else if (key == "as_sym_int" && v.is_object() && v.contains("as_int")) {
      a.kind = aten::Arg::Int;
      a.i = v["as_int"].get<int64_t>();
    } else if (key == "as_ints") {
      a.kind = aten::Arg::Ints;
      a.ints = v.get<std::vector<int64_t>>();
    } else if (key == "as_sym_ints") {
      a.kind = aten::Arg::Ints;
      for (const json &s : v) {
        if (!s.is_object() || !s.contains("as_int"))
          return fail("a symbolic size list; dsc compiles static shapes");
        a.ints.push_back(s["as_int"].get<int64_t>());
      }
    } else if (key == "as_float") {
      a.kind = aten::Arg::Float;
      a.f = number(v);
    } else if (key == "as_floats") {
      a.kind = aten::Arg::Floats;
      for (const json &f : v)
        a.floats.push_back(number(f));
    } else if (key == "as_bool") {
      a.kind = aten::Arg::Bool;
      a.i = v.get<bool>();
    } else if (key == "as_bools") {
      a.kind = aten::Arg::Bools;
      for (const json &b : v)
        a.ints.push_back(b.get<bool>());
    } else if (key == "as_string") {
      a.kind = aten::Arg::String;
      a.s = v.get<std::string>();
    } else if (key == "as_scalar_type") {
      a.kind = aten::Arg::ScalarType;
      a.i = v.get<int64_t>();
    } else if (key == "as_device") {
      a.kind = aten::Arg::Device;
      a.s = v.at("type").get<std::string>();
    } else if (key == "as_layout") {
      a.kind = aten::Arg::Layout;
      a.i = v.get<int64_t>();
    } else if (key == "as_memory_format") {
      a.kind = aten::Arg::MemoryFormat;
      a.i = v.get<int64_t>();
    } else {
      a.kind = aten::Arg::Other;
      a.s = key;
    }
    return a;
  }

  llvm::Error node(const json &j) {
    aten::Node n;
    n.target = j.at("target").get<std::string>();
    llvm::StringRef t(n.target);
    if (t.consume_front("torch.ops."))
      n.target = t.str();
    if (j.contains("name") && j["name"].is_string())
      n.name = j["name"].get<std::string>();
    for (const json &in : j.at("inputs")) {
      auto a = arg(in.at("arg"));
      if (!a)
        return a.takeError();
      n.args.push_back({in.at("name").get<std::string>(), std::move(*a)});
    }
    for (const json &out : j.at("outputs")) {
      if (out.contains("as_tensor")) {
        n.outputs.push_back(out["as_tensor"].at("name").get<std::string>());
      } else if (out.contains("as_tensors")) {
        for (const json &o : out["as_tensors"])
          n.outputs.push_back(o.at("name").get<std::string>());
      } else if (out.contains("as_none")) {
        n.outputs.push_back("");
      } else {
        return fail("node '" + n.name + "' (" + n.target + ") has a result that is not a tensor (" +
                    (out.is_object() && !out.empty() ? out.items().begin().key() : "?") +
                    "); dsc imports tensor programs");
      }
    }
    if (j.contains("metadata") && j["metadata"].is_object()) {
      const json &md = j["metadata"];
      if (md.contains("stack_trace") && md["stack_trace"].is_string())
        n.sourceLine = frontend::userFrame(md["stack_trace"].get<std::string>());
      if (md.contains("nn_module_stack") && md["nn_module_stack"].is_string())
        n.module = frontend::innermostModule(md["nn_module_stack"].get<std::string>());
    }
    p.nodes.push_back(std::move(n));
    return llvm::Error::success();
  }

  llvm::Error signature(const json &sig) {
    for (const json &spec : sig.at("input_specs")) {
      if (!spec.is_object() || spec.size() != 1)
        return fail("an input spec is not a one-key object");
      auto [kind, v] = *spec.items().begin();
      aten::Input in;
      if (kind == "parameter") {
        in.role = aten::Input::Parameter;
        in.placeholder = v.at("arg").at("name").get<std::string>();
        in.name = v.at("parameter_name").get<std::string>();
      } else if (kind == "buffer") {
        in.role = aten::Input::Buffer;
        in.placeholder = v.at("arg").at("name").get<std::string>();
        in.name = v.at("buffer_name").get<std::string>();
      } else if (kind == "tensor_constant") {
        in.role = aten::Input::Constant;
        in.placeholder = v.at("arg").at("name").get<std::string>();
        in.name = v.at("tensor_constant_name").get<std::string>();
      } else if (kind == "user_input") {
        in.role = aten::Input::UserInput;
        const json &a = v.at("arg");
        if (!a.contains("as_tensor"))
          return fail("a user input that is not a tensor (" +
                      (a.is_object() && !a.empty() ? a.items().begin().key() : "?") +
                      "); export forward(tensors...) -> loss");
        in.placeholder = in.name = a["as_tensor"].at("name").get<std::string>();
      } else {
        return fail("an input of kind '" + kind + "' (" +
                    (kind == "custom_obj" ? "a TorchBind object"
                     : kind == "token"    ? "an effect token"
                                          : "not a tensor") +
                    "); dsc imports programs of parameters, buffers and tensor inputs");
      }
      p.inputs.push_back(std::move(in));
    }
    for (const json &spec : sig.at("output_specs")) {
      if (!spec.is_object() || spec.size() != 1)
        return fail("an output spec is not a one-key object");
      auto [kind, v] = *spec.items().begin();
      if (kind != "user_output" && kind != "loss_output")
        return fail("the program has an output of kind '" + kind + "'" +
                    (kind == "buffer_mutation"
                         ? " (the forward updates a buffer, as BatchNorm's running statistics "
                           "do); dsc imports such models from ONNX so far"
                         : "") );
      const json &a = v.at("arg");
      if (!a.contains("as_tensor"))
        return fail("an output that is not a tensor; forward must return the loss");
      p.outputs.push_back(a["as_tensor"].at("name").get<std::string>());
    }
    return llvm::Error::success();
  }

  llvm::Error program(const json &j) {
    const json &gm = j.at("graph_module");
    const json &g = gm.at("graph");
    if (j.contains("torch_version") && j["torch_version"].is_string())
      p.producer = "PyTorch " + j["torch_version"].get<std::string>() + " (torch.export)";
    for (auto &[name, t] : g.at("tensor_values").items()) {
      auto m = meta(t, name);
      if (!m)
        return m.takeError();
      p.values[name] = std::move(*m);
    }
    if (auto e = signature(gm.at("signature")))
      return e;
    for (const json &n : g.at("nodes"))
      if (auto e = node(n))
        return e;
    const json &values = g.at("tensor_values");
    for (aten::Input &in : p.inputs)
      if (auto it = values.find(in.placeholder);
          it != values.end() && it->contains("requires_grad") &&
          (*it)["requires_grad"].is_boolean())
        in.requiresGrad = (*it)["requires_grad"].get<bool>();
    return llvm::Error::success();
  }
};

} // namespace

std::string zipKind(const std::string &path) {
  int code = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    return "unreadable: " + why;
  }
  std::vector<std::string> names = entryNames(z);
  zip_discard(z);
  bool pt2 = false, code_ = false, pickle = false;
  for (const std::string &n : names) {
    llvm::StringRef s(n);
    pt2 |= s.ends_with("/archive_format") || s == "archive_format";
    code_ |= s.contains("/code/") || s.starts_with("code/");
    pickle |= s.ends_with("data.pkl");
  }
  if (pt2)
    return "pt2";
  if (code_)
    return "torchscript";
  if (pickle)
    return "torch.save";
  return "";
}

llvm::Expected<std::unique_ptr<Archive>> Archive::open(const std::string &path) {
  std::unique_ptr<Archive> a(new Archive());
  a->impl_ = std::make_unique<Impl>();
  Impl &im = *a->impl_;
  im.path = path;
  a->program_.path = path;
  int code = 0;
  im.zip = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (!im.zip) {
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    return err(path, "not a readable .pt2 archive (a zip): " + why);
  }
  // The archive's folder: the one that holds archive_format.
  bool found = false;
  for (const std::string &n : entryNames(im.zip)) {
    llvm::StringRef s(n);
    if (s == "archive_format" || s.ends_with("/archive_format")) {
      im.prefix = s.drop_back(strlen("archive_format")).str();
      found = true;
      break;
    }
  }
  if (!found)
    return err(path, "a zip without archive_format: not a torch.export archive (.pt2)");
  auto text = [&](const char *name) -> llvm::Expected<std::string> {
    auto s = im.read(im.prefix + name, kMaxTextBytes);
    if (!s)
      return s.takeError();
    return llvm::StringRef(*s).trim().str();
  };
  auto format = text("archive_format");
  if (!format)
    return format.takeError();
  if (*format != "pt2")
    return err(path, "archive_format is '" + *format + "', not 'pt2'");
  if (auto version = text("archive_version")) {
    if (*version != "0" && *version != "1")
      return err(path, "archive_version '" + *version +
                           "' is not one dsc reads (0 and 1, PyTorch 2.6-2.11); "
                           "save the program with a PyTorch of those versions");
  } else {
    llvm::consumeError(version.takeError()); // older archives have none
  }
  if (auto order = text("byteorder")) {
    if (*order != "little")
      return err(path, "byteorder is '" + *order + "'; dsc reads little-endian archives");
  } else {
    llvm::consumeError(order.takeError());
  }

  // The program: models/model.json (torch.export.save writes one model).
  auto programText = im.read(im.prefix + "models/model.json", kMaxJsonBytes);
  if (!programText)
    return programText.takeError();
  json j = json::parse(*programText, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return err(path, "models/model.json is not valid JSON");
  Parser parser{path, a->program_};
  try {
    if (j.contains("schema_version")) {
      int major = j["schema_version"].at("major").get<int>();
      if (major != kSchemaMajor)
        return err(path, "torch.export schema version " + llvm::Twine(major) + "." +
                             llvm::Twine(j["schema_version"].value("minor", 0)) +
                             " is not one dsc reads (" + llvm::Twine(kSchemaMajor) +
                             ".x, PyTorch 2.6-2.11)");
    }
    if (auto e = parser.program(j))
      return std::move(e);
    // Where each tensor's bytes are.
    for (auto [config, folder] : {std::pair<const char *, const char *>{
                                      "data/weights/model_weights_config.json", "data/weights/"},
                                  {"data/constants/model_constants_config.json",
                                   "data/constants/"}}) {
      if (zip_name_locate(im.zip, (im.prefix + config).c_str(), 0) < 0)
        continue;
      auto bytes = im.read(im.prefix + config, kMaxJsonBytes);
      if (!bytes)
        return bytes.takeError();
      json c = json::parse(*bytes, nullptr, false);
      if (c.is_discarded() || !c.is_object() || !c.contains("config"))
        return err(path, llvm::Twine(config) + " is not valid JSON");
      for (auto &[name, v] : c["config"].items()) {
        if (v.value("use_pickle", false))
          return err(path, "tensor '" + name +
                               "' is stored as a pickle; dsc reads the raw tensors that "
                               "torch.export.save writes for plain parameters and buffers");
        auto m = parser.meta(v.at("tensor_meta"), name);
        if (!m)
          return m.takeError();
        // Contiguous storage from offset 0 is what dsc reads.
        const json &tm = v["tensor_meta"];
        int64_t expect = 1;
        bool contiguous = !tm.contains("storage_offset") ||
                          tm["storage_offset"].value("as_int", int64_t(0)) == 0;
        if (tm.contains("strides")) {
          const json &st = tm["strides"];
          for (size_t d = m->sizes.size(); d-- > 0;) {
            if (d >= st.size() || !st[d].is_object())
              break;
            if (m->sizes[d] != 1 && st[d].value("as_int", int64_t(-1)) != expect)
              contiguous = false;
            expect *= m->sizes[d];
          }
        }
        if (!contiguous)
          return err(path, "tensor '" + name + "' is a strided view of another storage; "
                                               "make it contiguous before exporting");
        std::string entry = im.prefix + folder + v.at("path_name").get<std::string>();
        if (auto e = im.checkSize(name, entry, *m))
          return std::move(e);
        im.tensors[name] = {entry, std::move(*m)};
      }
    }
  } catch (const json::exception &e) {
    return err(path, llvm::Twine("models/model.json does not follow torch.export's schema: ") +
                         e.what());
  }
  return std::move(a);
}

llvm::Expected<std::string> Archive::readTensor(const std::string &name,
                                                aten::TensorMeta &meta) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end())
    return err(impl_->path, "the archive holds no data for tensor '" + name + "'");
  meta = it->second.meta;
  int64_t bytes = aten::scalarTypeBytes(meta.dtype);
  if (!bytes)
    return err(impl_->path, "tensor '" + name + "' has element type " +
                                aten::scalarTypeName(meta.dtype) + ", which dsc does not read");
  for (int64_t d : meta.sizes)
    if (d && bytes > std::numeric_limits<int64_t>::max() / d)
      return err(impl_->path, "tensor '" + name + "': its size overflows 64 bits");
    else
      bytes *= d;
  auto data = impl_->read(it->second.entry, uint64_t(bytes));
  if (!data)
    return data.takeError();
  if (int64_t(data->size()) != bytes)
    return err(impl_->path, "tensor '" + name + "' has " + llvm::Twine(data->size()) +
                                " bytes in the archive, but its shape and type need " +
                                llvm::Twine(bytes));
  return data;
}

llvm::Error Archive::readFloat(const std::string &name, std::vector<int64_t> &shape,
                               std::vector<float> &values) const {
  aten::TensorMeta meta;
  auto data = readTensor(name, meta);
  if (!data)
    return data.takeError();
  shape = meta.sizes;
  size_t n = 1;
  for (int64_t d : meta.sizes)
    n *= size_t(d);
  values.resize(n);
  const char *p = data->data();
  switch (aten::ScalarType(meta.dtype)) {
  case aten::ScalarType::Float:
    std::memcpy(values.data(), p, n * 4);
    break;
  case aten::ScalarType::Double:
    for (size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      values[i] = float(d);
    }
    break;
  case aten::ScalarType::BFloat16:
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits = 0;
      std::memcpy(reinterpret_cast<char *>(&bits) + 2, p + 2 * i, 2);
      std::memcpy(&values[i], &bits, 4);
    }
    break;
  case aten::ScalarType::Half:
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      int exp = (h >> 10) & 31, mant = h & 1023;
      float v = exp == 0    ? std::ldexp(float(mant), -24)
                : exp == 31 ? (mant ? NAN : INFINITY)
                            : std::ldexp(float(mant | 1024), exp - 25);
      values[i] = (h & 0x8000) ? -v : v;
    }
    break;
  default:
    return err(impl_->path, "tensor '" + name + "' is " + aten::scalarTypeName(meta.dtype) +
                                ", not floating point");
  }
  return llvm::Error::success();
}

} // namespace dsc::pt2
