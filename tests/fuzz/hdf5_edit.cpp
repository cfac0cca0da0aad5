#include "tests/fuzz/hdf5_edit.h"

#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::fuzz {
namespace {

using h5::Handle;

struct Place {
  std::string path;  // "/model/encoder.layers.0.fc1.weight"
  bool dataset;      // else a group
};

herr_t collect(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (std::strcmp(name, ".") == 0) return 0;
  if (info->type == H5O_TYPE_GROUP || info->type == H5O_TYPE_DATASET) {
    static_cast<std::vector<Place>*>(out)->push_back(
        {std::string("/") + name, info->type == H5O_TYPE_DATASET});
  }
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

std::vector<Place> places_of(hid_t file) {
  std::vector<Place> places{{"/", false}};
  H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, collect, &places, H5O_INFO_BASIC);
  return places;
}

std::vector<std::string> attributes_of(hid_t file, const std::string& path) {
  std::vector<std::string> names;
  H5Aiterate_by_name(file, path.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute,
                     &names, H5P_DEFAULT);
  return names;
}

// A type for a new attribute or dataset: the ones Tandem writes and some it never does.
hid_t pick_type(FuzzInput& in, Handle* owned) {
  switch (in.below(9)) {
    case 0:
      return H5T_NATIVE_INT8;
    case 1:
      return H5T_NATIVE_UINT8;
    case 2:
      return H5T_NATIVE_INT32;
    case 3:
      return H5T_NATIVE_INT64;
    case 4:
      return H5T_NATIVE_UINT64;
    case 5:
      return H5T_NATIVE_FLOAT;
    case 6:
      return H5T_NATIVE_DOUBLE;
    case 7:
      return H5T_NATIVE_UINT16;
    default: {
      *owned = Handle(H5Tcopy(H5T_C_S1));
      H5Tset_size(owned->get(), 1 + in.below(16));
      return owned->get();
    }
  }
}

std::vector<hsize_t> pick_dims(FuzzInput& in, bool huge_allowed) {
  std::vector<hsize_t> dims(in.below(4));
  for (auto& d : dims) {
    d = huge_allowed && in.below(8) == 0 ? static_cast<hsize_t>(1) << in.below(40)
                                         : static_cast<hsize_t>(in.below(12));
  }
  return dims;
}

hsize_t count_of(const std::vector<hsize_t>& dims) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  return n;
}

// The type and dataspace of a new attribute or dataset.
struct NewValue {
  Handle owned_type;  // a string type made for it; the numeric ones are HDF5's own
  hid_t type;
  std::vector<hsize_t> dims;
  Handle space;

  NewValue(FuzzInput& in, bool huge_allowed)
      : type(pick_type(in, &owned_type)),
        dims(pick_dims(in, huge_allowed)),
        space(dims.empty()
                  ? H5Screate(H5S_SCALAR)
                  : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)) {}
  hsize_t count() const { return dims.empty() ? 1 : count_of(dims); }
};

// Bytes for `count` elements of `type`: the input's, repeated.
std::vector<char> fill(FuzzInput& in, hid_t type, hsize_t count) {
  std::vector<char> bytes(static_cast<size_t>(count) * H5Tget_size(type));
  const std::string pattern = in.text(16);
  for (size_t i = 0; i < bytes.size() && !pattern.empty(); ++i)
    bytes[i] = pattern[i % pattern.size()];
  return bytes;
}

void set_attribute(hid_t file, const std::string& object, const std::string& name, FuzzInput& in) {
  const NewValue value(in, false);
  const hid_t type = value.type;
  H5Adelete_by_name(file, object.c_str(), name.c_str(), H5P_DEFAULT);
  const Handle attribute(H5Acreate_by_name(file, object.c_str(), name.c_str(), type,
                                           value.space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                           H5P_DEFAULT));
  if (!attribute.valid()) return;
  std::vector<char> bytes = fill(in, type, value.count());
  if (!in.below(2) && H5Tget_class(type) != H5T_STRING && bytes.size() >= 8) {
    const int64_t number = in.integer();  // a plausible number rather than repeated bytes
    if (H5Tequal(type, H5T_NATIVE_INT64) > 0) std::memcpy(bytes.data(), &number, 8);
    if (H5Tequal(type, H5T_NATIVE_DOUBLE) > 0) {
      const double as_double = static_cast<double>(number);
      std::memcpy(bytes.data(), &as_double, 8);
    }
  }
  H5Awrite(attribute.get(), type, bytes.data());
}

// A new dataset at `path` (whatever was there deleted): any type and rank; a declared size far
// beyond the file's bytes is chunked and left unwritten, as a crafted file can declare it.
void create_dataset(hid_t file, const std::string& path, FuzzInput& in) {
  const NewValue value(in, true);
  const std::vector<hsize_t>& dims = value.dims;
  const hsize_t count = value.count();
  const bool sparse = count > (1u << 16) || count == 0;
  const Handle create(H5Pcreate(H5P_DATASET_CREATE));
  if (sparse && !dims.empty()) {
    std::vector<hsize_t> chunk(dims.size());
    for (size_t i = 0; i < dims.size(); ++i)
      chunk[i] = std::max<hsize_t>(1, std::min<hsize_t>(dims[i], 64));
    H5Pset_chunk(create.get(), static_cast<int>(chunk.size()), chunk.data());
  }
  H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  const Handle dataset(H5Dcreate2(file, path.c_str(), value.type, value.space.get(), H5P_DEFAULT,
                                  create.get(), H5P_DEFAULT));
  if (dataset.valid() && !sparse) {
    H5Dwrite(dataset.get(), value.type, H5S_ALL, H5S_ALL, H5P_DEFAULT,
             fill(in, value.type, count).data());
  }
}

// An existing dataset with its type and dataspace, and whether it holds integers or floats.
struct Existing {
  Handle dataset, type, space;
  H5T_class_t type_class = H5T_NO_CLASS;

  Existing(hid_t file, const std::string& path)
      : dataset(H5Dopen2(file, path.c_str(), H5P_DEFAULT)) {
    if (!dataset.valid()) return;
    type = Handle(H5Dget_type(dataset.get()));
    space = Handle(H5Dget_space(dataset.get()));
    type_class = H5Tget_class(type.get());
  }
  bool numbers() const { return type_class == H5T_INTEGER || type_class == H5T_FLOAT; }
};

// Overwrites a few elements of a dataset of numbers in place.
void poke_elements(hid_t file, const std::string& path, FuzzInput& in) {
  const Existing target(file, path);
  if (!target.numbers()) return;
  const hid_t space = target.space.get();
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const hsize_t count = count_of(dims);
  if (count == 0) return;
  const hsize_t one = 1;
  const Handle single(H5Screate_simple(1, &one, nullptr));
  for (uint64_t poke = 0, pokes = 1 + in.below(4); poke < pokes; ++poke) {
    hsize_t index = in.below(count);
    std::vector<hsize_t> coordinates(dims.size());
    for (size_t d = dims.size(); d-- > 0;) {
      coordinates[d] = index % dims[d];
      index /= dims[d];
    }
    if (rank > 0) H5Sselect_elements(space, H5S_SELECT_SET, 1, coordinates.data());
    if (target.type_class == H5T_INTEGER) {
      const int64_t value = in.integer();
      H5Dwrite(target.dataset.get(), H5T_NATIVE_INT64, single.get(), space, H5P_DEFAULT, &value);
    } else {
      const double value = in.below(2) ? in.raw<double>() : static_cast<double>(in.integer());
      H5Dwrite(target.dataset.get(), H5T_NATIVE_DOUBLE, single.get(), space, H5P_DEFAULT, &value);
    }
  }
}

// Recreates a 1-D dataset of numbers a few elements shorter or longer, its data kept.
void resize(hid_t file, const std::string& path, FuzzInput& in) {
  Existing target(file, path);
  if (!target.numbers() || H5Sget_simple_extent_ndims(target.space.get()) != 1) return;
  const Handle native(H5Tget_native_type(target.type.get(), H5T_DIR_ASCEND));
  hsize_t count = 0;
  H5Sget_simple_extent_dims(target.space.get(), &count, nullptr);
  std::vector<char> bytes(count * H5Tget_size(native.get()));
  H5Dread(target.dataset.get(), native.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  target.dataset.close();
  const int64_t delta = static_cast<int64_t>(in.below(9)) - 4;
  const hsize_t resized =
      static_cast<hsize_t>(std::max<int64_t>(0, static_cast<int64_t>(count) + delta));
  bytes.resize(std::max<size_t>(1, resized * H5Tget_size(native.get())), 0);
  H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  const Handle new_space(H5Screate_simple(1, &resized, nullptr));
  const Handle created(H5Dcreate2(file, path.c_str(), target.type.get(), new_space.get(),
                                  H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (created.valid() && resized > 0) {
    H5Dwrite(created.get(), native.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  }
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

void edit_once(hid_t file, FuzzInput& in) {
  const std::vector<Place> places = places_of(file);
  const Place& place = places[in.below(places.size())];
  const Place& other = places[in.below(places.size())];
  switch (in.below(8)) {
    case 0:  // gone
      if (place.path != "/") H5Ldelete(file, place.path.c_str(), H5P_DEFAULT);
      break;
    case 1: {  // an attribute gone
      const auto names = attributes_of(file, place.path);
      if (!names.empty()) {
        H5Adelete_by_name(file, place.path.c_str(), names[in.below(names.size())].c_str(),
                          H5P_DEFAULT);
      }
      break;
    }
    case 2: {  // an attribute rewritten, or one of another object's names added here
      auto names = attributes_of(file, place.path);
      const auto others = attributes_of(file, other.path);
      names.insert(names.end(), others.begin(), others.end());
      names.push_back("x");
      set_attribute(file, place.path, names[in.below(names.size())], in);
      break;
    }
    case 3:
      if (place.dataset) poke_elements(file, place.path, in);
      break;
    case 4:
      if (place.path != "/") create_dataset(file, place.path, in);
      break;
    case 5:
      if (place.dataset) resize(file, place.path, in);
      break;
    case 6:  // another object copied over this one (a split for another, a tensor for another)
      if (place.path != "/" && place.path != other.path &&
          place.path.rfind(other.path + "/", 0) != 0 &&
          other.path.rfind(place.path + "/", 0) != 0) {
        H5Ldelete(file, place.path.c_str(), H5P_DEFAULT);
        H5Ocopy(file, other.path.c_str(), file, place.path.c_str(), H5P_DEFAULT, H5P_DEFAULT);
      }
      break;
    default: {  // a new member beside an existing one: a new dataset or a link to another object
      const std::string group = place.dataset ? parent_of(place.path) : place.path;
      const std::string name = (group == "/" ? "" : group) + "/" +
                               (in.below(2) ? name_of(other.path) + "_" : "x") +
                               std::to_string(in.below(3));
      if (in.below(2)) {
        create_dataset(file, name, in);
      } else if (other.path != "/") {
        H5Lcreate_hard(file, other.path.c_str(), file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
      }
      break;
    }
  }
}

}  // namespace

bool raw_hdf5() {
  static const bool raw = [] {
    const char* value = std::getenv("TANDEM_FUZZ_RAW_HDF5");
    return value != nullptr && std::string(value) == "1";
  }();
  return raw;
}

std::string file_to_read(const std::string& base, const std::string& name, const uint8_t* data,
                         size_t size) {
  if (raw_hdf5())
    return write_scratch(name, std::string(reinterpret_cast<const char*>(data), size));
  FuzzInput input(data, size);
  return edited_copy(base, name, input);
}

std::vector<std::string> seeds_for(const std::string& base, std::vector<std::string> edits) {
  if (raw_hdf5()) return {read_whole(base)};
  return edits;
}

std::string edited_copy(const std::string& base, const std::string& name, FuzzInput& input) {
  const std::string copy = write_scratch(name, read_whole(base));
  const h5::QuietErrors quiet;  // an edit may fail (its object already gone), and that is fine
  Handle file(H5Fopen(copy.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file.valid()) fail("cannot open the copy " + copy);
  for (int edit = 0; edit < 8 && !input.empty(); ++edit) edit_once(file.get(), input);
  file.close();  // flushed before the reader opens it (a failed flush leaves what a crash would)
  return copy;
}

}  // namespace tandem::fuzz
